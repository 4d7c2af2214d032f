import Courier
import Foundation
import Testing

/// libcurl's cookie engine behind each session, against httpbin's cookie endpoints.
@Suite struct CookieTests {
    @Test func cookiesSetByRedirectAndByMaxAgeAreSentBack() async throws {
        let api = try await httpbinManager()
        let afterSet: JSON = try await api.GET("cookies/set", parameters: ["flavour": "oat"])
        #expect(afterSet["cookies"]["flavour"] == "oat")
        _ = try await api.GET(
            "response-headers", parameters: ["Set-Cookie": "lasting=yes; Max-Age=3600; Path=/"],
            serializer: DataResponseSerializer())
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == ["flavour": "oat", "lasting": "yes"])
        let stored = await api.cookies.all()
        #expect(stored.first { $0.name == "lasting" }?.isSessionCookie == false)
        #expect(stored.first { $0.name == "flavour" }?.isSessionCookie == true)
    }

    @Test func clearingRemovesEveryCookie() async throws {
        let api = try await httpbinManager()
        _ = try await api.GET("cookies/set", parameters: ["a": "1", "b": "2"])
        await api.cookies.removeAll()
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == [:])
        #expect(await api.cookies.all().isEmpty)
    }

    @Test func cookiesCanBeSetAndRemovedOneByOne() async throws {
        let httpbin = try await TestServers.httpbin()
        let api = try await httpbinManager()
        await api.cookies.set(Cookie(name: "token", value: "t1", domain: httpbin.host!))
        await api.cookies.set(setCookieHeader: "theme=dark; Path=/", for: httpbin)
        var echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == ["token": "t1", "theme": "dark"])
        let token = try #require(await api.cookies.all().first { $0.name == "token" })
        await api.cookies.remove(token)
        echo = try await api.GET("cookies")
        #expect(echo["cookies"] == ["theme": "dark"])
        #expect(await api.cookies.cookies(for: httpbin).map(\.name) == ["theme"])
    }

    @Test func aRequestCanOptOut() async throws {
        let api = try await httpbinManager()
        _ = try await api.GET("cookies/set", parameters: ["kept": "1"])
        let without = try await api.request(
            .get, "cookies", options: .init(handlesCookies: false), serializer: JSONResponseSerializer()
        ).value
        #expect(without["cookies"] == [:])
        _ = try await api.request(
            .get, "response-headers", parameters: ["Set-Cookie": "ignored=1"], options: .init(handlesCookies: false),
            serializer: DataResponseSerializer())
        #expect(await api.cookies.all().map(\.name) == ["kept"])
    }

    @Test func aNeverPolicyStoresNothing() async throws {
        let api = try await httpbinManager { $0.cookieAcceptPolicy = .never }
        _ = try await api.GET(
            "response-headers", parameters: ["Set-Cookie": "nope=1; Max-Age=60"], serializer: DataResponseSerializer())
        #expect(await api.cookies.all().isEmpty)
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == [:])
    }

    @Test(arguments: [CookieAcceptPolicy.always, .onlyFromRequestDomain])
    func theOwnDomainPolicyRefusesParentDomains(policy: CookieAcceptPolicy) async throws {
        // a.b.localhost (resolved to loopback by an address override, as no libcurl before 7.85
        // resolves *.localhost names itself) sets a cookie for its parent b.localhost, which
        // only the `.always` policy keeps.
        let httpbin = try await TestServers.httpbin()
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.cookieAcceptPolicy = policy
        configuration.addressOverrides = [.resolve("a.b.localhost", port: httpbin.port!, to: "127.0.0.1")]
        let api = HTTPSessionManager(
            baseURL: URL(string: "http://a.b.localhost:\(httpbin.port!)/")!, configuration: configuration)
        _ = try await api.GET(
            "response-headers", parameters: ["Set-Cookie": "mine=1"], serializer: DataResponseSerializer())
        _ = try await api.GET(
            "response-headers", parameters: ["Set-Cookie": "wide=1; Domain=b.localhost"],
            serializer: DataResponseSerializer())
        let names = await api.cookies.all().map(\.name).sorted()
        #expect(names == (policy == .always ? ["mine", "wide"] : ["mine"]))
    }

    @Test func sessionsDoNotShareCookies() async throws {
        let first = try await httpbinManager()
        let second = try await httpbinManager()
        _ = try await first.GET("cookies/set", parameters: ["only": "first"])
        let echo: JSON = try await second.GET("cookies")
        #expect(echo["cookies"] == [:])
    }

    @Test func aDefaultSessionKeepsPersistentCookiesInItsJar() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let httpbin = try await TestServers.httpbin()
        var configuration = HTTPSessionConfiguration.default
        configuration.storageDirectory = directory
        let first = HTTPSessionManager(baseURL: httpbin, configuration: configuration)
        _ = try await first.GET(
            "response-headers", parameters: ["Set-Cookie": "kept=1; Max-Age=3600; Path=/"],
            serializer: DataResponseSerializer())
        _ = try await first.GET("cookies/set", parameters: ["gone": "1"])
        first.invalidateAndCancel()
        let jar = try String(contentsOf: directory.appendingPathComponent("cookies.txt"), encoding: .utf8)
        #expect(jar.contains("\tkept\t1"))
        #expect(!jar.contains("gone"))
        // Cookies are secrets: the jar is the user's alone.
        let jarPath = directory.appendingPathComponent("cookies.txt").path
        #expect(try FileManager.default.attributesOfItem(atPath: jarPath)[.posixPermissions] as? Int == 0o600)

        let second = HTTPSessionManager(baseURL: httpbin, configuration: configuration)
        let echo: JSON = try await second.GET("cookies")
        #expect(echo["cookies"] == ["kept": "1"])
        await second.cookies.removeAll()
        let cleared = try String(contentsOf: directory.appendingPathComponent("cookies.txt"), encoding: .utf8)
        #expect(!cleared.contains("kept"))
    }

    @Test func aCorruptJarIsReadAsFarAsItMakesSense() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let httpbin = try await TestServers.httpbin()
        let future = Int(Date().timeIntervalSince1970) + 3600
        let text = "garbage\u{0}\u{1}\n\(httpbin.host!)\tFALSE\t/\tFALSE\t\(future)\tsurvivor\tyes\nhalf\tline\n"
        try Data(text.utf8).write(to: directory.appendingPathComponent("cookies.txt"))
        var configuration = HTTPSessionConfiguration.default
        configuration.storageDirectory = directory
        let api = HTTPSessionManager(baseURL: httpbin, configuration: configuration)
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == ["survivor": "yes"])
    }
}

extension CookieTests {
    // MARK: Cookies set through the API

    /// `CookieStore.set(setCookieHeader:for:)` applies the public suffix list, as libcurl does
    /// to the same headers in responses: no cookie for `co.uk`, `com`, or part of an address.
    @Test(arguments: [
        ("a=1; Domain=co.uk", "https://www.example.co.uk/"),
        ("a=1; Domain=.co.uk", "https://www.example.co.uk/"),
        ("a=1; Domain=com", "https://example.com/"),
        ("a=1; Domain=github.io", "https://someone.github.io/"),
        ("a=1; Domain=0.0.1", "http://127.0.0.1/"),
        ("a=1; Domain=0.1", "http://10.0.0.1/"),
    ])
    func aSetCookieHeaderForAPublicSuffixIsRefused(header: String, url: String) async throws {
        let api = try await httpbinManager()
        let stored = await api.cookies.set(setCookieHeader: header, for: try #require(URL(string: url)))
        #expect(!stored)
        #expect(await api.cookies.all().isEmpty)
    }

    @Test func aSetCookieHeaderForTheSiteOrItsParentIsStored() async throws {
        let api = try await httpbinManager()
        let url = try #require(URL(string: "https://www.example.co.uk/"))
        #expect(await api.cookies.set(setCookieHeader: "a=1; Domain=example.co.uk", for: url))
        #expect(await api.cookies.set(setCookieHeader: "b=2; Domain=www.example.co.uk", for: url))
        #expect(await api.cookies.set(setCookieHeader: "c=3", for: url))
        let stored = await api.cookies.all().map { "\($0.name)@\($0.domain)" }.sorted()
        #expect(stored == ["a@example.co.uk", "b@www.example.co.uk", "c@www.example.co.uk"])
    }

    /// A cookie set for part of 127.0.0.1 would otherwise go to the server at 127.0.0.1.
    @Test func aCookieForPartOfTheServersAddressIsNeverSent() async throws {
        let api = try await httpbinManager()
        let httpbin = try await TestServers.httpbin()
        #expect(!(await api.cookies.set(setCookieHeader: "leak=1; Domain=0.0.1", for: httpbin)))
        #expect(!(await api.cookies.set(Cookie(name: "leak", value: "2", domain: "0.0.1", includesSubdomains: true))))
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == [:])
    }

    /// A hand-built cookie is refused when its domain with subdomains is a public suffix, or a
    /// field holds a control character (a line break would write another line into the jar).
    @Test func aHandBuiltCookieThatCannotBeStoredIsRefused() async throws {
        let api = try await httpbinManager()
        #expect(!(await api.cookies.set(Cookie(name: "a", value: "1", domain: "co.uk", includesSubdomains: true))))
        #expect(!(await api.cookies.set(Cookie(name: "a", value: "1\nexample.com\tTRUE", domain: "example.com"))))
        #expect(!(await api.cookies.set(Cookie(name: "a\tb", value: "1", domain: "example.com"))))
        #expect(await api.cookies.all().isEmpty)
        #expect(await api.cookies.set(Cookie(name: "a", value: "1", domain: "example.co.uk", includesSubdomains: true)))
        #expect(await api.cookies.all().count == 1)
    }
}
