import Courier
import Foundation
import Testing

/// Where each configuration keeps its cookies, cache and credentials, proven with child
/// processes (`CourierTestHelper`) whose HOME and XDG_CACHE_HOME are a directory of the test's
/// own.
@Suite struct SessionStorageTests {
    private static func environment(_ home: URL) -> [String: String] {
        ["HOME": home.path, "XDG_CACHE_HOME": home.path]
    }

    @Test func anEphemeralSessionWritesNothingToDisk() async throws {
        let home = try DownloadTests.temporaryDirectory()
        let helper = try HelperProcess(
            ["ephemeral", try await TestServers.httpbin().absoluteString], environment: Self.environment(home))
        // The helper checks that cookies were sent back, that the second response came from the
        // cache, and that Basic and Digest authentication succeeded with a stored credential.
        _ = try await helper.line { $0 == "ok" }
        #expect(await helper.exitStatus() == 0)
        #expect(try FileManager.default.subpathsOfDirectory(atPath: home.path) == [])
    }

    @Test func aDefaultSessionKeepsPersistentCookiesForTheNextProcessButNotSessionCookies() async throws {
        let home = try DownloadTests.temporaryDirectory()
        let httpbin = try await TestServers.httpbin().absoluteString
        let setter = try HelperProcess(["cookies-set", httpbin], environment: Self.environment(home))
        _ = try await setter.line { $0 == "set" }
        #expect(await setter.exitStatus() == 0)
        // In the default place: $XDG_CACHE_HOME/<process name>/courier/.
        let jar = home.appendingPathComponent("CourierTestHelper/courier/cookies.txt")
        let text = try String(contentsOf: jar, encoding: .utf8)
        #expect(text.contains("\tkept\t1"))
        #expect(!text.contains("gone"))

        let reader = try HelperProcess(["cookies-echo", httpbin], environment: Self.environment(home))
        let line = try await reader.line { $0.hasPrefix("{") }
        #expect(try JSONDecoder().decode(JSON.self, from: Data(line.utf8)) == ["kept": "1"])
        #expect(await reader.exitStatus() == 0)
    }
}
