import Courier
import Foundation
import Testing

/// Tearing a session down while transfers run, and what it leaves behind.
@Suite struct EngineLifecycleTests {
    @Test func cancellingHundredsOfTasksLeavesNoConnectionOpen() async throws {
        // A server of our own, so that only this test's connections reach it.
        let server = try await TestServers.dedicatedFaultServer()
        let port = try #require(server.port)
        for _ in 0..<3 {
            let api = HTTPSessionManager(baseURL: server, configuration: .ephemeral)
            // Each drip takes 5 minutes: every task is still running when it is cancelled, however
            // long the first connections take (under ThreadSanitizer, with the whole suite
            // running, 30 s drips have ended before the loop below saw a connection).
            let tasks = (0..<400).map { index in
                api.dataTask(.get, "drip", parameters: ["n": 300, "delay": 1000, "i": .int(index)])
            }
            var connected = 0
            for _ in 0..<500 where connected == 0 {
                try await Task.sleep(for: .milliseconds(50))
                connected = try clientConnections(toPort: port)
            }
            #expect(connected > 0)
            for task in tasks { task.cancel() }
            for task in tasks { await #expect(throws: CancellationError.self) { _ = try await task.response } }
            api.invalidateAndCancel()
        }
        // The engine threads close their connections as they wind down.
        var open = try clientConnections(toPort: port)
        for _ in 0..<50 where open > 0 {
            try await Task.sleep(for: .milliseconds(100))
            open = try clientConnections(toPort: port)
        }
        #expect(open == 0)
    }
}

/// Client-side TCP connections to 127.0.0.1:`port` that are still open (ESTABLISHED or
/// CLOSE_WAIT) and whose server side is open too, from /proc/net/tcp. The server side is what
/// ties a connection to the server listening now: a connection another session kept to an
/// earlier server on the same port number (a test server stopped while a pool held it idle)
/// stays in CLOSE_WAIT on the client side, while its server side is gone or closing.
/// Counted by distinct client address: the kernel writes the table a page at a time, and a
/// socket opened or closed between two pages can shift the rest, so that a line appears twice
/// in one read (under a busy suite, thousands of sockets span many pages).
func clientConnections(toPort port: Int) throws -> Int {
    // Read to end of file: procfs reports size 0, and a one-shot read gets a single page.
    guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp") else { throw TestServerError("/proc/net/tcp") }
    defer { try? file.close() }
    let table = String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
    let hex = String(port, radix: 16, uppercase: true)
    let server = "0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    let open: Set<Substring> = ["01", "08"]
    // (local, remote, state) of every socket.
    let sockets = table.split(separator: "\n").dropFirst().compactMap { line -> (Substring, Substring, Substring)? in
        let columns = line.split(separator: " ", omittingEmptySubsequences: true)
        return columns.count > 3 ? (columns[1], columns[2], columns[3]) : nil
    }
    // The clients' addresses as the server's open sockets see them.
    let served = Set(sockets.filter { $0.0 == server && open.contains($0.2) }.map(\.1))
    return Set(sockets.filter { $0.1 == server && open.contains($0.2) && served.contains($0.0) }.map(\.0)).count
}

extension EngineLifecycleTests {
    // MARK: A manager released while it works

    /// Each request holds its manager: released mid-request, the manager lets the request
    /// finish, then goes (its thread ends). `invalidateAndCancel()` is the way to stop early.
    @Test func aReleasedManagerFinishesItsRequestsAndThenGoes() async throws {
        let httpbin = try await TestServers.httpbin()
        weak var released: HTTPSessionManager?
        let task: DataTask<JSON> = {
            let api = HTTPSessionManager(baseURL: httpbin, configuration: .ephemeral)
            released = api
            return api.dataTask(.get, "delay/1", parameters: ["after": "release"])
        }()
        let echo = try await task.value
        #expect(echo["args"]["after"] == "release")
        for _ in 0..<200 where released != nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(released == nil)
    }
}
