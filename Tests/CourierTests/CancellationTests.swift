import Courier
import Foundation
import Testing

/// Cancelling the awaiting Swift task, or the task object, ends the transfer promptly.
@Suite struct CancellationTests {
    @Test func cancelBeforeStartNeverSendsAnything() async throws {
        let api = try await faultManager()
        let name = "cancel-before-start-\(UInt32.random(in: 0...UInt32.max))"
        let task = api.dataTask(.get, "file/\(name)", parameters: ["n": 10])
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.response }
        try await Task.sleep(for: .milliseconds(200))
        let stats: JSON = try await api.GET("stats/\(name)")
        #expect(stats["requests"] == 0)
    }

    @Test func cancelAfterCompletionKeepsTheResult() async throws {
        let api = try await httpbinManager()
        let task = api.dataTask(.get, "get")
        let response = try await task.response
        task.cancel()
        #expect(try await task.response.status == response.status)
    }

    @Test func anAlreadyCancelledTaskDoesNotSend() async throws {
        let api = try await httpbinManager()
        let request = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await api.GET("delay/5")
        }
        await #expect(throws: CancellationError.self) { _ = try await request.value }
    }

    @Test func manyCancelledRequestsLeaveTheSessionUsable() async throws {
        let api = try await httpbinManager()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<200 {
                group.addTask { _ = try? await api.GET("delay/3") }
            }
            try await Task.sleep(for: .milliseconds(200))
            group.cancelAll()
        }
        let echo: JSON = try await api.GET("get", parameters: ["after": "cancel"])
        #expect(echo["args"]["after"] == "cancel")
    }

    @Test func releasingTheManagerEndsItsEngineWithoutLosingRequests() async throws {
        let httpbin = try await TestServers.httpbin()
        for round in 0..<20 {
            let api = HTTPSessionManager(baseURL: httpbin, configuration: .ephemeral)
            let echo: JSON = try await api.GET("get", parameters: ["round": .int(round)])
            #expect(echo["args"]["round"] == .string(String(round)))
        }
    }
}
