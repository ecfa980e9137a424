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
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", exact: "0.6.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
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
                // The client of a Coffer server (`Store(server:)`).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // A replica's `SyncEngine` runs as a service of an application's service group.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // `coffer serve`: the sync server, over any local backend.
        .target(
            name: "CofferServer",
            dependencies: [
                "CofferCrypto", "CofferVault", "CofferStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "coffer",
            dependencies: [
                "CofferCrypto", "CofferVault", "CofferStore", "CofferServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "TOMLKit", package: "TOMLKit"),
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
        // The store tests' one fixture (a store on any backend, through a server or not) and
        // helpers, for the store and server tests.
        .target(
            name: "CofferStoreTestSupport",
            dependencies: [
                "CofferStore", "CofferVault", "CofferCrypto", "CofferTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Tests/CofferStoreTestSupport"
        ),
        .testTarget(
            name: "CofferStoreTests",
            dependencies: [
                "CofferStore", "CofferServer", "CofferVault", "CofferCrypto", "CofferTestSupport", "CofferStoreTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // The server's routes in process, through HummingbirdTesting (the real-process tests of
        // the server are in CofferStoreTests, beside the client they serve).
        .testTarget(
            name: "CofferServerTests",
            dependencies: [
                "CofferServer", "CofferStore", "CofferVault", "CofferCrypto", "CofferTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "CofferCLITests", dependencies: ["CofferCrypto", "CofferVault", "CofferTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
