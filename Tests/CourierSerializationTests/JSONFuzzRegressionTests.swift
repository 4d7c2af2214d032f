import Foundation
import Testing

@testable import CourierJSON

/// What the `json` and `tape` fuzz targets found (Fuzz/README.md), each pinned down with the
/// input that found it (also in the target's corpus, Fuzz/Corpus/<target>/finding-*).
struct JSONFuzzRegressionTests {
    @Test func aNumberBeyondDoublesRangeIsNotJSON() throws {
        #expect(throws: JSONParsingError(offset: 6, reason: "number out of range: 1e999")) {
            try JSON(parsing: "[1e999]")
        }
        #expect(throws: JSONParsingError(offset: 6, reason: "number out of range: -1e400")) {
            try JSON(parsing: "-1e400")
        }
        #expect(try JSON(parsing: "[1e308]") == [.double(1e308)])
    }

    /// Foundation's JSONDecoder refuses `0e8`; the tape decoder must not answer for it.
    @Test func zeroWithAnExponentIsLeftToJSONDecoder() throws {
        let data = Data("[0e8]".utf8)
        #expect(try TapeDecoding.decode([Double].self, from: data, like: JSONDecoder()) == nil)
        #expect(
            try TapeDecoding.decode([Double].self, from: Data("[0, 0.0, -0]".utf8), like: JSONDecoder()) == [0, 0, 0])
    }
}
