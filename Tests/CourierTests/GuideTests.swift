import Foundation
import Testing

/// The guide: its source is the DocC articles of Sources/Courier/Courier.docc, from which
/// `scripts/guide` generates Documentation/Usage.md and Documentation/AdvancedUsage.md.
@Suite struct GuideTests {
    /// The guide's Swift blocks compile as a reader would paste them: README.md and the DocC
    /// articles (the generated files hold the articles' blocks unchanged), each block on its own
    /// beside the names a reader assumes (`scripts/guide --compile`, against this build's modules). A
    /// block that stops compiling (a renamed method, a missing import, a result that is no longer
    /// discardable) fails here.
    @Test func everySwiftBlockOfTheGuideCompiles() async throws {
        let root = TestServers.repositoryRoot
        let modules = HelperProcess.executable.deletingLastPathComponent()
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", root.appendingPathComponent("scripts/guide").path, "--compile", "--bin-path", modules.path],
            in: root)
        #expect(run.status == 0, "\(run.stderr)")
        // Every page has blocks: a change to the extraction that finds none fails too.
        let counts = run.stdout.split(separator: " ").compactMap { Int($0) }
        #expect(counts.count == 2 && counts[0] == counts[1] && counts[1] >= 90, "\(run.stdout)")
    }

    /// Usage.md and AdvancedUsage.md are what `scripts/guide` makes of the articles: a hand edit
    /// of either, or an article changed without running `scripts/guide`, fails here (and in
    /// scripts/test), as does a link from README.md or Documentation/ to a section they lack.
    @Test func theGeneratedGuideMatchesTheArticles() async throws {
        let root = TestServers.repositoryRoot
        let guide = root.appendingPathComponent("scripts/guide")
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", guide.path, "--check"], in: root)
        #expect(run.status == 0, "\(run.stderr)")
    }
}
