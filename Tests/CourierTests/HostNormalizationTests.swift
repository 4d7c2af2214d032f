@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// Every decision keyed by a host compares one spelling of it: upper case, a trailing dot and
/// an IDNA name (in Unicode or `xn--` form) are the same host to pins, HSTS, credentials,
/// cookies, redirects and address overrides, against the TLS test servers (whose certificate
/// also names `xn--bcher-kva.courier.test`, that is `bücher.courier.test`). The names resolve
/// through address overrides, which match every spelling too (this machine's resolver knows
/// `localhost` but not `localhost.`).
@Suite struct HostNormalizationTests {
    static let idnaName = "bücher.courier.test"
    static let idnaASCII = "xn--bcher-kva.courier.test"

    @Test(arguments: [
        ("localhost", "localhost"), ("LocalHost.", "localhost"), ("EXAMPLE.com", "example.com"),
        ("Bücher.Example.", "xn--bcher-kva.example"), ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("bücher.courier.test", "xn--bcher-kva.courier.test"), ("münchen.de", "xn--mnchen-3ya.de"),
        ("例え.テスト", "xn--r8jz45g.xn--zckzah"), ("[::1]", "::1"), ("FE80::1", "fe80::1"),
        ("127.0.0.1", "127.0.0.1"), (".", "."), ("", ""),
    ])
    func aHostHasOneNormalizedSpelling(host: String, normalized: String) {
        #expect(HostName.normalized(host) == normalized)
    }

    @Test(arguments: [
        ("localhost:8080", "localhost:8080"), ("LOCALHOST.:8080", "localhost:8080"), ("Example.com.", "example.com"),
        ("ada@LocalHost.:80", "ada@localhost:80"), ("[FE80::1]:443", "[fe80::1]:443"),
        ("bücher.courier.test.:443", "xn--bcher-kva.courier.test:443"),
    ])
    func theEngineIsHandedOneSpellingOfEachAuthority(authority: String, normalized: String) {
        #expect(HostName.normalizedAuthority(authority) == normalized)
        #expect(HostName.normalizingHost(of: "https://\(authority)/a?b#c") == "https://\(normalized)/a?b#c")
    }

    /// `localhost` on `ports` resolved to 127.0.0.1, in whatever spelling a request uses.
    static func localhost(_ ports: Int...) -> [AddressOverride] {
        ports.map { .resolve("LocalHost", port: $0, to: "127.0.0.1") }
    }

    /// The host spellings of one TLS server that the tests try, other than the pinned one.
    static func spellings(_ servers: TLSServers, _ name: String) -> [URL] {
        let port = servers.port(name)
        return ["localhost.", "LOCALHOST", "LocalHost."].map { URL(string: "https://\($0):\(port)/hello.txt")! }
    }

    @Test func aPinHoldsForEverySpellingOfItsHost() async throws {
        let servers = try await TestServers.tls()
        // Pinned to the rotated key: the valid server's key matches no pin.
        let api = TLSTests.trusting(servers) {
            $0.tls.pinnedPublicKeys["localhost"] = [servers.pin("rotated")]
            $0.addressOverrides = Self.localhost(servers.port("valid"), servers.port("rotated"))
        }
        for url in Self.spellings(servers, "valid") {
            let message = await TLSTests.tlsMessage { _ = try await TLSTests.text(api, url) }
            #expect(message?.contains("pin") == true, "\(url)")
        }
        // The same spellings reach the server whose key is pinned.
        for url in Self.spellings(servers, "rotated") { #expect(try await TLSTests.text(api, url) == "hello\n") }
    }

    @Test func aPinForAnIDNAHostHoldsInEitherForm() async throws {
        let servers = try await TestServers.tls()
        let port = servers.port("valid")
        for pinned in [Self.idnaName, Self.idnaASCII.uppercased() + "."] {
            let api = TLSTests.trusting(servers) {
                $0.tls.pinnedPublicKeys[pinned] = [servers.pin("rotated")]
                $0.addressOverrides = [.resolve(Self.idnaName, port: port, to: "127.0.0.1")]
            }
            for host in [Self.idnaName, Self.idnaASCII, "BÜCHER.courier.test."] {
                let url = URL(string: "https://\(host):\(port)/hello.txt")!
                let message = await TLSTests.tlsMessage { _ = try await TLSTests.text(api, url) }
                #expect(message?.contains("pin") == true, "\(pinned) against \(host)")
            }
        }
        // The right pin lets every spelling through, resolved by an override in the other form.
        let api = TLSTests.trusting(servers) {
            $0.tls.pinnedPublicKeys[Self.idnaName] = [servers.pin("valid")]
            $0.addressOverrides = [.resolve(Self.idnaASCII + ".", port: port, to: "127.0.0.1")]
        }
        for host in [Self.idnaName, Self.idnaASCII, "BÜCHER.courier.test."] {
            #expect(try await TLSTests.text(api, URL(string: "https://\(host):\(port)/hello.txt")!) == "hello\n")
        }
    }

    @Test func hstsUpgradesEverySpellingOfTheHostThatAskedForIt() async throws {
        let servers = try await TestServers.tls()
        let port = servers.port("valid")
        let api = TLSTests.trusting(servers) {
            $0.addressOverrides = Self.localhost(port) + [.resolve(Self.idnaName, port: port, to: "127.0.0.1")]
        }
        _ = try await TLSTests.text(api, servers.url("valid").appendingPathComponent("hsts"))
        _ = try await TLSTests.text(api, URL(string: "https://\(Self.idnaName):\(port)/hsts")!)
        for host in [
            "localhost.", "LOCALHOST", "LocalHost.", Self.idnaName, Self.idnaASCII + ".", "BÜCHER.courier.test",
        ] {
            // Plain http to the TLS port gets a 400 from nginx unless it was upgraded.
            let response = try await api.request(
                .get, "http://\(host):\(port)/tls", serializer: StringResponseSerializer())
            #expect(response.request.scheme == "https", "\(host)")
            #expect(response.value.hasPrefix("TLSv1.3"), "\(host)")
        }
    }

    @Test func hstsStoreKeysOneHostHoweverItIsSpelled() {
        let store = HSTSStore(file: nil)
        store.record("max-age=60", host: "Bücher.Example.")
        store.record("max-age=60; includeSubDomains", host: "EXAMPLE.org.")
        let upgrade = { (url: String) in store.upgrade(URL(string: url)!)?.scheme }
        for url in [
            "http://xn--bcher-kva.example/", "http://bücher.example./", "http://XN--BCHER-KVA.EXAMPLE/",
            "http://example.org/", "http://api.Example.ORG./",
        ] {
            #expect(upgrade(url) == "https", "\(url)")
        }
        #expect(upgrade("http://other.example/") == nil)
    }

    @Test func aStoredCredentialAnswersEverySpellingOfItsOrigin() async throws {
        let fault = try await TestServers.fault()
        let port = try #require(fault.port)
        let api = try await faultManager { $0.addressOverrides = Self.localhost(port) }
        api.credentials.set(
            Credential(user: "ada", password: "x", sendsPreemptively: true),
            for: try #require(ProtectionSpace(url: URL(string: "http://LocalHost.:\(port)/")!)))
        let name = "spelled-\(UUID().uuidString.prefix(8))"
        for host in ["localhost", "localhost.", "LOCALHOST"] {
            let reply: JSON = try await api.GET("http://\(host):\(port)/auth-required/\(name)?user=ada&password=x")
            #expect(reply["authenticated"] == true, "\(host)")
        }
        // Another host (127.0.0.1) is another origin: it gets nothing up front.
        let other = await capturedError {
            let _: JSON = try await api.GET("http://127.0.0.1:\(port)/auth-required/\(name)?user=ada&password=x")
        }
        #expect(isCourierError(other) { $0.response?.status.code == 401 })
        let sent = try await HostileServerTests.authorizations(api, name)
        #expect(sent.count == 4)
        #expect(sent.last == .null)
    }

    @Test func cookiesOfAHostGoToEverySpellingOfIt() async throws {
        let port = try #require(try await TestServers.httpbin().port)
        let api = try await httpbinManager { $0.addressOverrides = Self.localhost(port) }
        let _: JSON = try await api.GET("http://LOCALHOST.:\(port)/cookies/set", parameters: ["flavour": "oat"])
        for host in ["localhost", "localhost.", "LocalHost"] {
            let reply: JSON = try await api.GET("http://\(host):\(port)/cookies")
            #expect(reply["cookies"]["flavour"] == "oat", "\(host)")
            #expect(await api.cookies.cookies(for: URL(string: "http://\(host):\(port)/")!).map(\.name) == ["flavour"])
        }
    }

    @Test func aRedirectToAnotherSpellingOfTheOriginKeepsItsAuthorization() async throws {
        let fault = try await TestServers.fault()
        let port = try #require(fault.port)
        let api = try await faultManager { $0.addressOverrides = Self.localhost(port) }
        let name = "redirect-spelled-\(UUID().uuidString.prefix(8))"
        let basic = "Basic " + Data("ada:x".utf8).base64EncodedString()
        let target = "http://LOCALHOST.:\(port)/auth-required/\(name)-b?user=ada&password=x"
        let reply: JSON = try await api.GET(
            "http://localhost:\(port)/auth-redirect/\(name)-a", parameters: ["to": .string(target)],
            headers: ["Authorization": basic])
        #expect(reply["authenticated"] == true)
        // Another host is another origin: the header is dropped.
        let elsewhere = "http://127.0.0.1:\(port)/auth-required/\(name)-c?user=ada&password=x"
        let error = await capturedError {
            let _: JSON = try await api.GET(
                "http://localhost:\(port)/auth-redirect/\(name)-a", parameters: ["to": .string(elsewhere)],
                headers: ["Authorization": basic])
        }
        #expect(isCourierError(error) { $0.response?.status.code == 401 })
        #expect(try await HostileServerTests.authorizations(api, "\(name)-c") == [.null])
    }
}
