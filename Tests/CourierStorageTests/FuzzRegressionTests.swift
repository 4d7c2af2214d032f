import Foundation
import Testing

@testable import CourierStorage

/// What the fuzzers found (Fuzz/README.md), each pinned down with the input that found it
/// (also in the target's corpus, Fuzz/Corpus/<target>/finding-*): the cookie parsers.
struct FuzzRegressionTests {
    static let url = URL(string: "https://www.example.com/dir/page")!

    // MARK: setcookie

    @Test func aSetCookieWithAControlCharacterIsRefused() {
        #expect(Cookie(setCookie: "\n=", for: Self.url) == nil)
        #expect(Cookie(setCookie: "a=1\n2", for: Self.url) == nil)
        #expect(Cookie(setCookie: "a\tb=1", for: Self.url) == nil)
        #expect(Cookie(setCookie: "a=b\u{7F}", for: Self.url) == nil)
        #expect(Cookie(setCookie: " =1", for: Self.url) == nil)
        let path = Cookie(setCookie: "a=1; Path=/x\ty", for: Self.url)
        #expect(path?.path == "/dir")  // the attribute is ignored
    }

    @Test func emptyAttributesAreSkipped() {
        let cookie = Cookie(setCookie: "a=1; ; =; =x; Secure", for: Self.url)
        #expect(cookie?.name == "a")
        #expect(cookie?.isSecure == true)
    }

    @Test func aHugeMaxAgeIsCappedAndWritesALine() throws {
        let cookie = try #require(Cookie(setCookie: "x=1; Max-Age=9223372036854775807", for: Self.url))
        #expect(cookie.expires == Date(timeIntervalSince1970: Cookie.latestExpiry))
        #expect(cookie.netscapeLine.hasSuffix("\t253402300799\tx\t1"))
    }

    // MARK: cookiejar

    @Test func aJarLineWithAControlCharacterIsRefused() {
        let finding = "\n\0\0{\u{C3}6\t\u{AF}\u{AF}\u{AF}\t\u{D9}\t\t1\t3\0\t#"
        #expect(Cookie(netscapeLine: Substring(finding)) == nil)
        #expect(Cookie(netscapeLine: "example.com\tFALSE\t/\tFALSE\t0\ta\tb\u{1}") == nil)
        #expect(Cookie(netscapeLine: "example.com\tFALSE\t/\tFALSE\t0\ta\tb\tc") == nil)  // eight fields
    }

    @Test func aJarLineEndingInCRIsRead() {
        let cookie = Cookie(netscapeLine: "example.com\tFALSE\t/\tFALSE\t0\ta\tb\r")
        #expect(cookie?.value == "b")
    }

    @Test func aJarDomainMustBeAHostName() {
        #expect(Cookie(netscapeLine: "#x.com\tFALSE\t/\tFALSE\t0\ta\tb") == nil)  // a comment
        #expect(Cookie(netscapeLine: "#HttpOnly_#x.com\tFALSE\t/\tFALSE\t0\ta\tb") == nil)
        #expect(Cookie(netscapeLine: "..x.com\tTRUE\t/\tFALSE\t0\ta\tb") == nil)
        #expect(Cookie(netscapeLine: "\tFALSE\t/\tFALSE\t0\ta\tb") == nil)
        #expect(Cookie(netscapeLine: "a b.com\tFALSE\t/\tFALSE\t0\ta\tb") == nil)
    }

    /// Read byte by byte: a `#HttpOnly_` prefix, a leading dot or a tab followed by a combining
    /// mark is still itself, so what is written reads back as written.
    @Test func combiningMarksDoNotHideSeparators() throws {
        let httpOnly = try #require(Cookie(netscapeLine: "#HttpOnly_\u{301}x.com\tFALSE\t/\tFALSE\t0\ta\tb"))
        #expect(httpOnly.isHTTPOnly)
        #expect(httpOnly.domain == "\u{301}x.com")
        #expect(Cookie(netscapeLine: Substring(httpOnly.netscapeLine)) == httpOnly)
        let dotted = try #require(Cookie(netscapeLine: ".\u{301}x.com\tTRUE\t/\tFALSE\t0\ta\tb"))
        #expect(dotted.domain == "\u{301}x.com")
        #expect(Cookie(netscapeLine: "x.com\tFALSE\t/\tFALSE\t0\ta\t\u{301}b\tc") == nil)
    }

    @Test func aJarExpiryBeyondYear9999IsCapped() throws {
        let cookie = try #require(Cookie(netscapeLine: "x.com\tFALSE\t/\tFALSE\t9223372036854775807\ta\tb"))
        #expect(cookie.expires == Date(timeIntervalSince1970: Cookie.latestExpiry))
        #expect(Cookie(netscapeLine: Substring(cookie.netscapeLine)) == cookie)
    }
}
