import Foundation
import Testing

/// Loads Project Wycheproof vector files (C2SP/wycheproof `testvectors_v1/`) from
/// `../shared/testvectors/wycheproof/` beside the package root. The files are read in place,
/// never copied into the project. When the folder is absent, the tests that use it are
/// disabled with a comment that says where they looked, so they show up as skipped.
enum Wycheproof {
    /// `<package root>/../shared/testvectors/wycheproof`, found from this source file's path
    /// (`<package root>/Tests/CofferCryptoTests/Wycheproof.swift`).
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // Tests/CofferCryptoTests
        .deletingLastPathComponent() // Tests
        .deletingLastPathComponent() // package root
        .deletingLastPathComponent() // the folder holding the checkout
        .appendingPathComponent("shared/testvectors/wycheproof", isDirectory: true)
        .standardizedFileURL

    static let aeadFile = "xchacha20_poly1305_test.json"
    static let xdhFile = "x25519_test.json"
    static let eddsaFile = "ed25519_test.json"

    /// True when the folder holds all three vector files.
    static var isAvailable: Bool {
        [aeadFile, xdhFile, eddsaFile].allSatisfy {
            FileManager.default.isReadableFile(atPath: directory.appendingPathComponent($0).path)
        }
    }

    /// The reason shown for a skipped Wycheproof test.
    static var unavailableReason: Comment {
        Comment(rawValue: "Wycheproof vectors not found at \(directory.path) "
            + "(expected \(aeadFile), \(xdhFile), \(eddsaFile))")
    }

    static func load<Group: Decodable>(_ name: String, as _: Group.Type) throws -> VectorFile<Group> {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return try JSONDecoder().decode(VectorFile<Group>.self, from: data)
    }

    // MARK: - Schema (only the fields the tests use)

    enum Result: String, Decodable, Sendable {
        case valid, invalid, acceptable
    }

    struct VectorFile<Group: Decodable>: Decodable {
        let algorithm: String
        let numberOfTests: Int
        let testGroups: [Group]
    }

    /// `aead_test_schema_v1.json`
    struct AeadGroup: Decodable {
        let ivSize: Int
        let keySize: Int
        let tagSize: Int
        let tests: [AeadCase]
    }

    struct AeadCase: Decodable {
        let tcId: Int
        let comment: String
        let flags: [String]
        let key: String
        let iv: String
        let aad: String
        let msg: String
        let ct: String
        let tag: String
        let result: Result
    }

    /// `xdh_comp_schema_v1.json`
    struct XdhGroup: Decodable {
        let curve: String
        let tests: [XdhCase]
    }

    struct XdhCase: Decodable {
        let tcId: Int
        let comment: String
        let flags: [String]
        let publicKey: String
        let privateKey: String
        let shared: String
        let result: Result

        enum CodingKeys: String, CodingKey {
            case tcId, comment, flags, shared, result
            case publicKey = "public"
            case privateKey = "private"
        }
    }

    /// `eddsa_verify_schema_v1.json`
    struct EddsaGroup: Decodable {
        struct Key: Decodable {
            let curve: String
            let pk: String
        }

        let publicKey: Key
        let tests: [EddsaCase]
    }

    struct EddsaCase: Decodable {
        let tcId: Int
        let comment: String
        let flags: [String]
        let msg: String
        let sig: String
        let result: Result
    }
}
