import Courier
import Foundation
import Testing

/// Tearing a session down while transfers run, and what it leaves behind.
@Suite struct DriverLifecycleTests {
    @Test func invalidatingWhileTransfersRunCancelsThemAll() async throws {
        let api = try await httpbinManager { $0.maximumConnectionsPerHost = 16 }
        let tasks = (0..<40).map { _ in api.dataTask(.get, "delay/5") }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let start = clock.now
        api.invalidateAndCancel()
        for task in tasks {
            await #expect(throws: CancellationError.self) { _ = try await task.response }
        }
        #expect((clock.now - start).seconds < 2)
        await #expect(throws: CancellationError.self) { _ = try await api.GET("get") }
    }

    @Test func cancellingThousandsOfTasksLeavesNoConnectionOpen() async throws {
        // A server of our own, so that only this test's connections reach it.
        let server = try await TestServers.dedicatedFaultServer()
        let port = try #require(server.port)
        for _ in 0..<3 {
            let api = HTTPSessionManager(baseURL: server, configuration: .ephemeral)
            let tasks = (0..<400).map { index in
                api.dataTask(.get, "drip", parameters: ["n": 100, "delay": 50, "i": .int(index)])
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try clientConnections(toPort: port) > 0)
            for task in tasks { task.cancel() }
            for task in tasks { await #expect(throws: CancellationError.self) { _ = try await task.response } }
            api.invalidateAndCancel()
        }
        // The driver threads close their connections as they wind down.
        var open = try clientConnections(toPort: port)
        for _ in 0..<50 where open > 0 {
            try await Task.sleep(for: .milliseconds(100))
            open = try clientConnections(toPort: port)
        }
        #expect(open == 0)
    }
}

/// Client-side TCP connections to 127.0.0.1:`port` that are still open (ESTABLISHED or
/// CLOSE_WAIT), from /proc/net/tcp.
func clientConnections(toPort port: Int) throws -> Int {
    let table = try String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)
    let remote = String(format: "0100007F:%04X", port)
    return table.split(separator: "\n").dropFirst().filter { line in
        let columns = line.split(separator: " ", omittingEmptySubsequences: true)
        return columns.count > 3 && columns[2] == remote && (columns[3] == "01" || columns[3] == "08")
    }.count
}
