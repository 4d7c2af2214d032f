import Foundation
import Testing

@testable import Courier

/// Suspend and resume called on one task from several threads at once: whatever the
/// interleaving, the task ends up as the last call left it. (Before, a suspend handed on to
/// the engine after a later resume had gone through could leave a transfer paused for good.)
/// `scripts/sanitize` runs these under ThreadSanitizer too.
@Suite struct SuspendResumeStressTests {
    /// A 1 s dripping body: the toggles find the transfer running.
    static let drip: JSON = ["n": 100, "delay": 10]

    /// `operation`'s result, or a failure after `limit` instead of a hang.
    static func withinLimit<T: Sendable>(
        _ limit: Duration, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw CourierError.timedOut(.init(message: "still waiting after \(limit)"))
            }
            return value
        }
    }

    /// `task` toggled by four concurrent togglers, `rounds` suspend-resume pairs each.
    static func toggle<Value>(_ task: DataTask<Value>, rounds: Int) async {
        await withTaskGroup(of: Void.self) { togglers in
            for _ in 0..<4 {
                togglers.addTask {
                    for _ in 0..<rounds {
                        task.suspend()
                        task.resume()
                        if Bool.random() { await Task.yield() }
                    }
                }
            }
        }
    }

    /// Tasks at once: fewer under a sanitizer (`scripts/sanitize` sets `COURIER_SANITIZER`),
    /// where every lock and pause costs many times more and the rest of the suite runs beside.
    static let tasks = ProcessInfo.processInfo.environment["COURIER_SANITIZER"] == nil ? 24 : 8

    @Test func aTaskToggledFromSeveralThreadsFinishesAfterTheLastResume() async throws {
        let api = try await faultManager()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<Self.tasks {
                group.addTask {
                    let task = api.dataTask(.get, "drip", parameters: Self.drip, serializer: DataResponseSerializer())
                    await Self.toggle(task, rounds: 20)
                    task.resume()  // the last call
                    let body = try await Self.withinLimit(.seconds(90)) { try await task.value }
                    #expect(body == faultBytes(100))
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func aTaskWhoseLastCallIsSuspendStaysSuspendedUntilResumed() async throws {
        let api = try await faultManager()
        let task = api.dataTask(.get, "drip", parameters: Self.drip, serializer: DataResponseSerializer())
        await Self.toggle(task, rounds: 50)
        task.suspend()  // the last call
        let progress = Task {
            var latest: Int64 = 0
            for await value in task.downloadProgress { latest = value.completedBytes }
            return latest
        }
        try await Task.sleep(for: .milliseconds(300))
        let before = await Self.received(task)
        try await Task.sleep(for: .milliseconds(700))
        // Suspended: no byte more in 700 ms of a body that drips one every 10 ms.
        #expect(await Self.received(task) == before)
        task.resume()
        #expect(try await Self.withinLimit(.seconds(90)) { try await task.value } == faultBytes(100))
        #expect(await progress.value == 100)
    }

    /// The bytes `task` has received so far.
    static func received(_ task: DataTask<Data>) async -> Int64 {
        var iterator = task.downloadProgress.makeAsyncIterator()
        return await iterator.next()?.completedBytes ?? 0
    }
}
