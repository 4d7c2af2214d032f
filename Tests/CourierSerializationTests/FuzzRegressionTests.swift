import Foundation
import Testing

@testable import CourierSerialization

/// What the fuzzers found (Fuzz/README.md), each pinned down with the input that found it
/// (also in the target's corpus, Fuzz/Corpus/<target>/finding-*): query strings.
struct FuzzRegressionTests {
    // MARK: query

    @Test func aNullUnderAnEmptyNameWritesNothing() throws {
        #expect(try QueryStringEncoding.encode(["": .null]) == "")
        #expect(try QueryStringEncoding.pairs(["": .null]).isEmpty)
        #expect(try QueryStringEncoding.encode(["": "x", "a": .null]) == "=x&a")
    }
}
