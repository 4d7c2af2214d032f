import Foundation
import Testing

/// The guide's Swift blocks compile as a reader would paste them: README.md, Usage.md,
/// AdvancedUsage.md and the DocC articles, each block on its own beside the names a reader
/// assumes (`scripts/check-guide`, against this build's modules). A block that stops compiling
/// (a renamed method, a missing import, a result that is no longer discardable) fails here.
@Suite struct GuideTests {
    @Test func everySwiftBlockOfTheGuideCompiles() async throws {
        let root = TestServers.repositoryRoot
        let modules = HelperProcess.executable.deletingLastPathComponent()
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", root.appendingPathComponent("scripts/check-guide").path, "--bin-path", modules.path], in: root)
        #expect(run.status == 0, "\(run.stderr)")
        // Every page has blocks: a change to the extraction that finds none fails too.
        let counts = run.stdout.split(separator: " ").compactMap { Int($0) }
        #expect(counts.count == 2 && counts[0] == counts[1] && counts[1] >= 100, "\(run.stdout)")
    }
}
