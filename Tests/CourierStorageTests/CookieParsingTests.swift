import CourierStorage
import Foundation
import Testing

/// `Set-Cookie` as a response sets it (RFC 6265 section 5.2), which requests a cookie goes
/// with, and the Netscape cookie file lines libcurl reads and writes.
@Suite struct CookieParsingTests {
    static let url = URL(string: "https://www.example.com/shop/cart/items")!
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    static func cookie(_ value: String, for url: URL = url) -> Cookie? {
        Cookie(setCookie: value, for: url, now: now)
    }

    @Test func aPlainCookieIsForTheHostAndTheDirectoryOfThePath() throws {
        let cookie = try #require(Self.cookie(" id = 42 "))
        #expect(cookie.name == "id")
        #expect(cookie.value == "42")
        #expect(cookie.domain == "www.example.com")
        #expect(!cookie.includesSubdomains)
        #expect(cookie.path == "/shop/cart")
        #expect(cookie.isSessionCookie)
        #expect(!cookie.isSecure && !cookie.isHTTPOnly)
    }

    @Test func attributesAreReadCaseInsensitively() throws {
        let cookie = try #require(
            Self.cookie(
                "id=1; DOMAIN=.Example.com; path=/shop; SECURE; HttpOnly; Expires=Wed, 21 Oct 2026 07:28:00 GMT"))
        #expect(cookie.domain == "example.com")
        #expect(cookie.includesSubdomains)
        #expect(cookie.path == "/shop")
        #expect(cookie.isSecure)
        #expect(cookie.isHTTPOnly)
        #expect(cookie.expires == Date(timeIntervalSince1970: 1_792_567_680))
    }

    @Test func maxAgeWinsOverExpiresInEitherOrder() {
        let first = Self.cookie("a=1; Max-Age=60; Expires=Wed, 21 Oct 2026 07:28:00 GMT")
        let last = Self.cookie("a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT; Max-Age=60")
        #expect(first?.expires == Self.now.addingTimeInterval(60))
        #expect(last?.expires == Self.now.addingTimeInterval(60))
        // Zero or less: expired already.
        #expect(Self.cookie("a=1; Max-Age=0")?.expires.map { $0 <= Self.now } == true)
        #expect(Self.cookie("a=1; Max-Age=-5")?.expires.map { $0 < Self.now } == true)
        // A year past 9999 is kept as the end of 9999.
        #expect(Self.cookie("a=1; Max-Age=999999999999")?.expires == Date(timeIntervalSince1970: 253_402_300_799))
    }

    @Test func aDomainOfAnotherSiteIsRefused() {
        #expect(Self.cookie("a=1; Domain=other.com") == nil)
        #expect(Self.cookie("a=1; Domain=ww.example.com") == nil)
        #expect(Self.cookie("a=1; Domain=shop.www.example.com") == nil)
        #expect(Self.cookie("a=1; Domain=www.example.com")?.includesSubdomains == true)
    }

    @Test(arguments: ["", "novalue", "=1", " =1", "a\tb=1", "a=1\n2", "a=b\u{7F}"])
    func whatIsNotACookieIsRefused(value: String) {
        #expect(Self.cookie(value) == nil)
    }

    @Test func aPathThatIsNotAbsoluteIsIgnored() {
        #expect(Self.cookie("a=1; Path=relative")?.path == "/shop/cart")
        #expect(Self.cookie("a=1", for: URL(string: "https://www.example.com/top")!)?.path == "/")
        #expect(Self.cookie("a=1", for: URL(string: "https://www.example.com")!)?.path == "/")
    }

    @Test func aCookieGoesWithRequestsItsDomainPathAndSchemeMatch() {
        let cookie = Cookie(name: "a", value: "1", domain: "example.com", includesSubdomains: true, path: "/shop")
        #expect(cookie.matches(URL(string: "http://example.com/shop")!))
        #expect(cookie.matches(URL(string: "http://www.EXAMPLE.com/shop/cart")!))
        #expect(!cookie.matches(URL(string: "http://example.com/shopping")!))
        #expect(!cookie.matches(URL(string: "http://example.com/")!))
        #expect(!cookie.matches(URL(string: "http://badexample.com/shop")!))
        let hostOnly = Cookie(name: "a", value: "1", domain: "example.com", path: "/", isSecure: true)
        #expect(hostOnly.matches(URL(string: "https://example.com/x")!))
        #expect(!hostOnly.matches(URL(string: "https://www.example.com/x")!))
        #expect(!hostOnly.matches(URL(string: "http://example.com/x")!))  // secure: https only
    }

    @Test func aCookieFileLineGoesBothWays() throws {
        let cookie = Cookie(
            name: "id", value: "a b", domain: "example.com", includesSubdomains: true, path: "/shop",
            expires: Date(timeIntervalSince1970: 1_792_567_680), isSecure: true, isHTTPOnly: true)
        #expect(cookie.netscapeLine == "#HttpOnly_.example.com\tTRUE\t/shop\tTRUE\t1792567680\tid\ta b")
        let read = try #require(Cookie(netscapeLine: Substring(cookie.netscapeLine + "\r")))
        #expect(read == cookie)
        let session = Cookie(name: "s", value: "", domain: "example.com")
        #expect(Cookie(netscapeLine: Substring(session.netscapeLine)) == session)
    }

    @Test(arguments: [
        "# a comment", "", "   ", "example.com\tFALSE\t/\tFALSE\t0\tname",  // six fields
        "example.com\tFALSE\t/\tFALSE\tsoon\tname\tvalue", ".\tFALSE\t/\tFALSE\t0\tname\tvalue",
        "exa mple.com\tFALSE\t/\tFALSE\t0\tname\tvalue", "example.com\tFALSE\t/\tFALSE\t0\t\tvalue",
        "example.com\tFALSE\t/\tFALSE\t0\tname\tva\u{1}lue",
    ])
    func aMalformedCookieFileLineIsSkipped(line: String) {
        #expect(Cookie(netscapeLine: Substring(line)) == nil)
    }
}

/// `WWW-Authenticate` and `Proxy-Authenticate` as the pipeline reads them: the schemes
/// offered and the first realm.
@Suite struct AuthenticateHeaderTests {
    @Test func schemesAndTheFirstRealm() {
        let parsed = AuthenticateHeader.parse([
            #"Digest realm="api", qop="auth", nonce="abc""#, #"Basic realm="fallback""#,
        ])
        #expect(parsed.schemes == ["Digest", "Basic"])
        #expect(parsed.realm == "api")
    }

    @Test func aRealmIsFoundInAnyCaseAndMayBeMissing() {
        #expect(AuthenticateHeader.parse([#"Basic REALM="Shouting""#]).realm == "Shouting")
        let bare = AuthenticateHeader.parse(["Bearer", "Negotiate"])
        #expect(bare.schemes == ["Bearer", "Negotiate"])
        #expect(bare.realm == nil)
        #expect(AuthenticateHeader.parse([]).schemes.isEmpty)
    }

    @Test func aParameterAloneIsNotAScheme() {
        // A value that starts with a parameter (the rest of a list split elsewhere).
        #expect(AuthenticateHeader.parse([#"realm="x""#]).schemes.isEmpty)
        #expect(AuthenticateHeader.parse([#"realm="x""#]).realm == "x")
    }
}
