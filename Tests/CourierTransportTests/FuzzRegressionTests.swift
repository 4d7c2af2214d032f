import Foundation
import Testing

@testable import CourierTransport

/// What the fuzzers found (Fuzz/README.md), each pinned down with the input that found it
/// (also in the target's corpus, Fuzz/Corpus/<target>/finding-*): `Content-Disposition` file names.
struct FuzzRegressionTests {
    // MARK: disposition

    @Test func aSuggestedNameIsOneVisibleComponent() {
        #expect(ContentDisposition.sanitized(" ..") == nil)
        #expect(ContentDisposition.sanitized(" .hidden") == "hidden")
        #expect(ContentDisposition.sanitized("a/\u{301}..") == "\u{301}..")  // not `..`
        #expect(ContentDisposition.sanitized("x/\u{301}name") == "\u{301}name")
        #expect(ContentDisposition.sanitized("invoice\u{202E}fdp.exe") == "invoicefdp.exe")
        #expect(ContentDisposition.sanitized("a\u{2028}b\u{200B}c") == "abc")
    }
}
