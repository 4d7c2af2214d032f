import Courier
import Foundation
import Testing

/// What the process's environment configures (`HTTPSessionConfiguration.trustsEnvironment`):
/// the proxy variables and OpenSSL's `SSL_CERT_FILE` and `SSL_CERT_DIR`, read when the manager
/// is made. Each test runs a GET in a child process (CourierTestHelper's `get`) whose
/// environment it sets, since the test process's own is shared by every test running.
@Suite struct EnvironmentTests {
    /// The variables of this suite, empty unless given (none inherited from the test's own
    /// environment): an empty value is as good as none, to Courier and to libcurl.
    private static func environment(_ given: [String: String]) -> [String: String] {
        var environment = given
        for name in [
            "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
            "SSL_CERT_FILE", "SSL_CERT_DIR",
        ] where environment[name] == nil {
            environment[name] = ""
        }
        return environment
    }

    /// The body the helper printed, or nil when its GET failed (exit status 1).
    private func helperGET(
        _ url: URL, _ options: [String] = [], environment: [String: String]
    ) async throws -> String? {
        let helper = try HelperProcess(
            ["get", url.absoluteString] + options, environment: Self.environment(environment))
        let line = try? await helper.line { _ in true }
        let status = await helper.exitStatus()
        return status == 0 ? line : nil
    }

    private func helperJSON(
        _ url: URL, _ options: [String] = [], environment: [String: String]
    ) async throws -> JSON {
        let body = try #require(try await helperGET(url, options, environment: environment))
        return try JSONDecoder().decode(JSON.self, from: Data(body.utf8))
    }

    /// The fault server as a proxy with its credentials in the URL, as the variables carry them.
    private func proxyVariable() async throws -> String {
        let port = try #require(try await TestServers.fault().port)
        return "http://courier:proxy-secret@127.0.0.1:\(port)"
    }

    // MARK: Proxies

    @Test func aProxyNamedInTheEnvironmentIsUsed() async throws {
        let target = try await TestServers.httpbin().appendingPathComponent("get")
        let reply = try await helperJSON(target, environment: ["http_proxy": try await proxyVariable()])
        #expect(reply["proxied"] == .string(target.absoluteString))
        #expect(reply["proxyAuthorization"] != .null)
    }

    @Test func noProxyInTheEnvironmentSendsMatchingHostsDirect() async throws {
        let target = try await TestServers.httpbin().appendingPathComponent("get")
        let reply = try await helperJSON(
            target, environment: ["http_proxy": try await proxyVariable(), "NO_PROXY": "127.0.0.1"])
        #expect(reply["proxied"] == nil)
        #expect(reply["url"] == .string(target.absoluteString))  // httpbin's own echo
    }

    @Test func aSessionThatDoesNotTrustTheEnvironmentIgnoresItsProxy() async throws {
        let target = try await TestServers.httpbin().appendingPathComponent("get")
        let reply = try await helperJSON(
            target, ["ignoring-environment"], environment: ["http_proxy": try await proxyVariable()])
        #expect(reply["proxied"] == nil)
        #expect(reply["url"] == .string(target.absoluteString))
    }

    @Test func noProxyInTheEnvironmentIsIgnoredWithAConfiguredProxyWhenNotTrusted() async throws {
        let target = try await TestServers.httpbin().appendingPathComponent("get")
        let proxy = "proxy=" + (try await proxyVariable())
        // Trusted, NO_PROXY sends the host direct even past the configured proxy, as curl does.
        let direct = try await helperJSON(target, [proxy], environment: ["NO_PROXY": "127.0.0.1"])
        #expect(direct["proxied"] == nil)
        // Not trusted, the configured proxy takes every request.
        let proxied = try await helperJSON(
            target, ["ignoring-environment", proxy], environment: ["NO_PROXY": "127.0.0.1"])
        #expect(proxied["proxied"] == .string(target.absoluteString))
    }

    // MARK: Certificate authorities

    @Test func sslCertFileInTheEnvironmentIsTrustedInPlaceOfTheSystemsBundle() async throws {
        let servers = try await TestServers.tls()
        let url = servers.url("valid").appendingPathComponent("hello.txt")
        // The test CA is not the system's: without the variable the certificate is refused.
        #expect(try await helperGET(url, environment: [:]) == nil)
        #expect(try await helperGET(url, environment: ["SSL_CERT_FILE": servers.ca1.path]) != nil)
        // Not read by a session that does not trust the environment.
        #expect(
            try await helperGET(url, ["ignoring-environment"], environment: ["SSL_CERT_FILE": servers.ca1.path])
                == nil)
    }

    @Test func sslCertDirInTheEnvironmentIsTrustedInPlaceOfTheSystemsDirectory() async throws {
        let servers = try await TestServers.tls()
        let url = servers.url("valid").appendingPathComponent("hello.txt")
        #expect(try await helperGET(url, environment: ["SSL_CERT_DIR": servers.caDirectory.path]) != nil)
        #expect(
            try await helperGET(url, ["ignoring-environment"], environment: ["SSL_CERT_DIR": servers.caDirectory.path])
                == nil)
    }
}
