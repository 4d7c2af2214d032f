import Courier
@_spi(CourierInternals) import CourierCore
import Foundation
import Testing

@testable import CourierPipeline

/// AFHTTPSessionManager's reference table of relative paths, with Foundation's answer for
/// `foo/` (the trailing slash stays).
@Suite struct URLResolutionTests {
    static let base = URL(string: "http://example.com/v1/")!

    @Test(
        arguments: [
            ("foo", "http://example.com/v1/foo"),
            ("foo?bar=baz", "http://example.com/v1/foo?bar=baz"),
            ("/foo", "http://example.com/foo"),
            ("foo/", "http://example.com/v1/foo/"),
            ("/foo/", "http://example.com/foo/"),
            ("http://example2.com/", "http://example2.com/"),
        ])
    func pathsResolveAgainstTheBaseURL(path: String, expected: String) throws {
        let url = try RequestBuilding.resolve(path, against: Self.base)
        #expect(url.absoluteString == expected)
    }

    @Test func aBaseURLWithoutTrailingSlashGetsOne() throws {
        let base = RequestBuilding.normalizedBaseURL(URL(string: "http://example.com/v1"))
        #expect(base?.absoluteString == "http://example.com/v1/")
        let url = try RequestBuilding.resolve("foo", against: base)
        #expect(url.absoluteString == "http://example.com/v1/foo")
    }

    @Test func aBaseURLWithoutPathIsKept() throws {
        let base = RequestBuilding.normalizedBaseURL(URL(string: "http://example.com"))
        #expect(try RequestBuilding.resolve("foo", against: base).absoluteString == "http://example.com/foo")
    }

    @Test func aManagerNormalizesItsBaseURL() {
        let api = HTTPSessionManager(baseURL: URL(string: "http://example.com/v1"), configuration: .ephemeral)
        #expect(api.baseURL?.absoluteString == "http://example.com/v1/")
    }

    @Test(arguments: ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/", "javascript:alert(1)"])
    func nonHTTPSchemesAreRefused(url: String) {
        #expect {
            try RequestBuilding.resolve(url, against: nil)
        } throws: { error in
            if case CourierError.unsupportedScheme = error { return true }
            return false
        }
    }

    @Test(arguments: ["foo", "http://", "http:///path", "http://exa mple.com/", "http://example.com/\r\nX: y"])
    func malformedURLsAreRefused(url: String) {
        #expect {
            try RequestBuilding.resolve(url, against: nil)
        } throws: { error in
            if case CourierError.invalidURL = error { return true }
            return false
        }
    }
}

extension URLResolutionTests {
    @Test func aBaseURLWithTrailingSlashIsKeptAsIs() {
        let base = RequestBuilding.normalizedBaseURL(URL(string: "http://example.com/v1/?k=v"))
        #expect(base?.absoluteString == "http://example.com/v1/?k=v")
        let noSlash = RequestBuilding.normalizedBaseURL(URL(string: "http://example.com/v1?k=v"))
        #expect(noSlash?.absoluteString == "http://example.com/v1/?k=v")
    }
}

/// The fast path for plain relative paths must agree with Foundation everywhere it applies.
@Suite struct PlainPathResolutionTests {
    static let bases = ["http://example.com/v1/", "http://example.com/", "https://example.com:8443/a/b/"]
    static let paths = [
        "foo", "foo?bar=baz", "foo/", "users/42", "a/b/c?x=1&y=2", "./foo", "../foo", "foo/../bar", "foo/./bar",
        ".hidden", "..x", "x..", "a/.", "a/..", "a/...", "foo?q=../x", "mailto:x", "a:b/c", "a/b:c", "foo#frag",
        "foo bar", "%41bc", "é", "?q", "/abs", "//host/x", "a=b&c;d@e!f$g*h+i,j~k_l-m", "",
    ]

    @Test(arguments: bases, paths)
    func agreesWithFoundation(base: String, path: String) throws {
        let baseURL = try #require(BaseURL(URL(string: base)))
        guard let fast = baseURL.resolvePlain(path) else { return }
        let expected = try #require(URL(string: path, relativeTo: URL(string: base))?.absoluteURL)
        #expect("\(baseURL.scheme)://\(baseURL.authority)\(fast)" == expected.absoluteString)
    }

    @Test func takesTheFastPathForOrdinaryPaths() throws {
        let base = try #require(BaseURL(URL(string: "http://example.com/v1/")))
        #expect(base.resolvePlain("users/1") == "/v1/users/1")
        #expect(base.resolvePlain("get?page=2") == "/v1/get?page=2")
        #expect(base.resolvePlain("../x") == nil)
        #expect(base.resolvePlain("/x") == nil)
    }
}
