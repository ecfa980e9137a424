import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The server's and the client's decoder of request and answer bodies refuses a key it does not
/// know, anywhere in a body, and nothing else.
@Suite("server API bodies: unknown keys")
struct RemoteAPIDecodeTests {
    struct Inner: Codable { var a: Int; var b: String? }
    struct Outer: Codable { var items: [Inner]; var name: String }

    func refusal(_ json: String) -> String? {
        do {
            _ = try RemoteAPI.decode(Outer.self, Data(json.utf8), what: "body")
            return nil
        } catch let error as StoreError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test("a key the type does not have is refused wherever it is, a null one is absent, and escapes and spacing change nothing")
    func unknownKeys() {
        #expect(refusal(#"{"items": [{"a": 1}, {"a": 2, "b": "x"}], "name": "n"}"#) == nil)
        #expect(refusal(#"{"items": [], "name": "n", "extra": null}"#) == nil)
        #expect(refusal(" {\n\t\"name\" : \"n\\\"q\\\\\" ,\"items\":[ {\"a\":1 , \"b\" : null} ] } ") == nil)
        #expect(refusal(#"{"items": [], "name": "n", "extra": 1}"#) == "the body is not valid: an unknown field at .extra")
        // In the third element only, after two that do not have it.
        #expect(refusal(#"{"items": [{"a": 1}, {"a": 2}, {"a": 3, "c": [1, {"d": 2}]}], "name": "n"}"#)
                == "the body is not valid: an unknown field at .items[].c")
        #expect(refusal(#"{"items": [{"a": 1, "x": {}}], "name": "n", "y": "z"}"#) == "the body is not valid: an unknown field at .items[].x")
        // A known key spelled with an escape is not the key.
        #expect(refusal(#"{"items": [], "n\u0061me": "n", "name": "n"}"#)?.contains("unknown field") == true)
        #expect(refusal(#"{"items": [], "name": 5}"#)?.contains("wrong type") == true)
    }
}
