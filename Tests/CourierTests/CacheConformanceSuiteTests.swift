import Foundation
import Testing

/// The public HTTP cache test suite (Conformance/cache-tests, run as published) in browser
/// mode, every `fetch()` answered by `CourierTestHelper cache-bridge` (one manager on the
/// `.default` configuration): Courier passes more tests than Chrome, Safari and Firefox did in
/// their published results, and fails no required test. `scripts/conformance` prints the
/// same run as a table.
@Suite struct CacheConformanceSuiteTests {
    @Test(.timeLimit(.minutes(10))) func courierPassesMoreThanTheBrowsersAndFailsNoRequiredTest() async throws {
        let root = TestServers.repositoryRoot
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("cache-tests-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: report) }
        var environment: [String: String] = [:]
        // As HelperProcess: leaks are looked for in the test process, not in the helper.
        if let options = ProcessInfo.processInfo.environment["ASAN_OPTIONS"] {
            environment["ASAN_OPTIONS"] = options + ":detect_leaks=0"
        }
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "node", "Conformance/run-cache-tests.mjs", "--bridge", HelperProcess.executable.path, "--json",
                report.path, "--check", "yes",
            ], in: root, environment: environment)
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: report)) as? [String: Any]
        let counts = try #require(summary?["counts"] as? [String: [String: Int]])
        let courier = try #require(counts["Courier"])
        #expect(courier["required failed"] == 0, "\(run.stdout)")
        #expect((courier["pass"] ?? 0) > (counts["Chrome"]?["pass"] ?? .max), "\(run.stdout)")
    }
}
