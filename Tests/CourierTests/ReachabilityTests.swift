import Courier
import Foundation
import Testing

/// Reachability and `waitsForConnectivity`, in a network namespace of the test's own
/// (`unshare -rn`: a loopback link and nothing else), where the helper may add and remove
/// addresses and routes and bring the link down and up
/// (Tests/Support/CourierTestHelper/ReachabilityScenario.swift). The kernel here (gVisor)
/// has no dummy or veth links: the paths come and go on the loopback link.
@Suite struct ReachabilityTests {
    static let checks = [
        "starts-unreachable", "address-added-reachable-through-lo", "address-removed-unreachable",
        "statuses-are-changes", "request-waits", "request-sent-when-path-appears", "request-has-one-transaction",
        "no-wait-fails-at-once", "wait-ends-at-the-timeout", "wait-ends-at-the-call-deadline",
        "refused-does-not-wait", "route-reachable-through-lo",
        "link-down-unreachable", "link-up-reachable-again",
    ]

    @Test func pathsAndWaitingRequestsFollowTheNamespacesLinksAddressesAndRoutes() async throws {
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            ["-rn", HelperProcess.executable.path, "reachability", "8080"],
            in: FileManager.default.temporaryDirectory)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(run.status == 0, "\(run.stderr)")
        for check in Self.checks {
            #expect(
                lines.contains("ok \(check)"), "\(lines.first { $0.hasPrefix("fail \(check)") } ?? "missing: \(check)")"
            )
        }
        #expect(lines.last == "done")
    }

    @Test func theManagersMonitorWatchesTheBaseURLsHost() async throws {
        let api = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:9/v1/"), configuration: .ephemeral)
        let monitor = try #require(api.reachability)
        #expect(monitor.host == "127.0.0.1")
        let status = await monitor.currentStatus()
        guard case .reachable(let interface) = status else {
            Issue.record("127.0.0.1 is not reachable: \(status)")
            return
        }
        #expect(interface.isLoopback)
        #expect(HTTPSessionManager(configuration: .ephemeral).reachability == nil)
        #expect(ReachabilityMonitor(host: "[::1]").host == "::1")
        #expect(await ReachabilityMonitor(host: "no-such-host.invalid").currentStatus() == .unreachable)
    }
}
