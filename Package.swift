// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Coffer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CofferCrypto", targets: ["CofferCrypto"]),
        .library(name: "CofferVault", targets: ["CofferVault"]),
        .library(name: "CofferStore", targets: ["CofferStore"]),
        .executable(name: "coffer", targets: ["coffer"]),
        .executable(name: "coffer-bench", targets: ["coffer-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // libsodium, the only cryptography. Imported by CofferCrypto alone.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .target(name: "CofferCrypto", dependencies: ["CSodium"]),
        .target(
            name: "CofferVault",
            dependencies: ["CofferCrypto", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "CofferStore",
            dependencies: [
                "CofferCrypto", "CofferVault",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for binding and reading record rows in place on the hot paths.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .executableTarget(
            name: "coffer",
            dependencies: [
                "CofferCrypto", "CofferVault", "CofferStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "coffer-bench",
            dependencies: [
                "CofferCrypto", "CofferVault", "CofferStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["sqlite3-baseline.py"]
        ),
        .executableTarget(
            name: "coffer-example",
            dependencies: ["CofferCrypto", "CofferVault", "CofferStore"]
        ),
        .executableTarget(
            name: "coffer-example-postgres",
            dependencies: ["CofferCrypto", "CofferVault", "CofferStore"]
        ),
        // Helpers every test target shares (temporary folders, files, bytes, secrets).
        .target(name: "CofferTestSupport", dependencies: ["CofferCrypto"], path: "Tests/CofferTestSupport"),
        .testTarget(name: "CofferCryptoTests", dependencies: ["CofferCrypto", "CofferTestSupport"]),
        .testTarget(name: "CofferVaultTests", dependencies: ["CofferVault", "CofferCrypto", "CofferTestSupport"]),
        .testTarget(
            name: "CofferStoreTests",
            dependencies: [
                "CofferStore", "CofferVault", "CofferCrypto", "CofferTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(name: "CofferCLITests", dependencies: ["CofferCrypto", "CofferTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
