import Foundation
import Testing

@testable import Courier

/// `dnsCacheLifetime`, against a resolver the test controls: CourierTestHelper runs in a
/// mount namespace of its own (`unshare -m`) where a file of the test's is bind-mounted over
/// `/etc/hosts`, which the helper rewrites between two requests (the host moves from 127.0.0.1
/// to 127.0.0.2). A fault server listening on every address answers at both.
@Suite(.enabled(if: canMakeMountNamespaces, "needs unshare -m (root, or CAP_SYS_ADMIN)"))
struct DNSLifetimeTests {
    /// The addresses the helper's two requests connected to, with `lifetime` seconds of DNS
    /// cache.
    private func addresses(lifetime: Int) async throws -> [String] {
        let server = try await TestServers.faultServerOnEveryAddress()
        let port = try #require(server.port)
        let hosts = FileManager.default.temporaryDirectory.appendingPathComponent("courier-hosts-\(UUID().uuidString)")
        try "127.0.0.1 moving.courier.test\n".write(to: hosts, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: hosts) }
        let helper = try HelperProcess(
            ["dns-lifetime", String(lifetime), "http://moving.courier.test:\(port)/status/200", hosts.path],
            launcher: mountNamespaceLauncher(binding: hosts.path, over: "/etc/hosts"))
        let line = try await helper.line { _ in true }
        #expect(await helper.exitStatus() == 0)
        return line.split(separator: " ").map(String.init)
    }

    @Test func aZeroLifetimeResolvesForEveryNewConnection() async throws {
        #expect(try await addresses(lifetime: 0) == ["127.0.0.1", "127.0.0.2"])
    }

    @Test func withinTheLifetimeTheCachedAddressIsUsed() async throws {
        #expect(try await addresses(lifetime: 60) == ["127.0.0.1", "127.0.0.1"])
    }
}
