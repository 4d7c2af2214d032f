import Foundation
import Testing

@testable import Courier

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
