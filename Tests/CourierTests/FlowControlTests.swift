import Courier
import Foundation
import Testing

/// Suspending tasks, bandwidth limits, task limits and queues.
@Suite struct FlowControlTests {
    @Test func aSuspendedDownloadStopsAndResumes() async throws {
        let api = try await faultManager()
        let name = "suspend-\(UInt32.random(in: 0...UInt32.max))"
        let directory = try DownloadTests.temporaryDirectory()
        let task = api.downloadTask(
            "file/\(name)", parameters: ["n": 2_000_000], to: directory.appendingPathComponent("f"))
        // 2 MB at 100 kB/s takes 20 s: suspend once some bytes have arrived, long before the end
        // (waiting on progress, not on the clock, which a busy machine stretches: under
        // ThreadSanitizer, with the whole suite in parallel, this test's task has waited more
        // than 4 s for a turn, so a faster rate let the download finish before the suspend).
        task.setMaximumBytesPerSecond(100_000)
        for await progress in task.downloadProgress where progress.completedBytes >= 100_000 { break }
        task.suspend()
        try await Task.sleep(for: .milliseconds(200))
        let progress = task.downloadProgress
        var iterator = progress.makeAsyncIterator()
        let atSuspend = await iterator.next()
        try await Task.sleep(for: .milliseconds(800))
        // Nothing moved while suspended (the stream holds only the newest value).
        let stream = task.downloadProgress
        var later = stream.makeAsyncIterator()
        let whileSuspended = await later.next()
        #expect(atSuspend?.completedBytes == whileSuspended?.completedBytes)
        #expect((whileSuspended?.completedBytes ?? 0) < 2_000_000)
        task.resume()
        task.setMaximumBytesPerSecond(nil)
        let file = try await task.value
        #expect(try Data(contentsOf: file) == faultBytes(2_000_000))
    }

    @Test func aTaskSuspendedBeforeStartingWaitsForResume() async throws {
        let api = try await faultManager()
        let name = "held-\(UInt32.random(in: 0...UInt32.max))"
        let task = api.dataTask(.get, "file/\(name)", parameters: ["n": 10], serializer: DataResponseSerializer())
        task.suspend()
        try await Task.sleep(for: .milliseconds(300))
        let stats: JSON = try await api.GET("stats/\(name)")
        #expect(stats["requests"] == 0)
        task.resume()
        #expect(try await task.value == faultBytes(10))
    }

    @Test func extraTasksWaitForTheirTurn() async throws {
        let api = try await faultManager { $0.maximumConcurrentTasks = 2 }
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    _ = try await api.GET(
                        "drip", parameters: ["n": 5, "delay": 100], serializer: DataResponseSerializer())
                }
            }
            try await group.waitForAll()
        }
        // Six half-second transfers, two at a time: about 1.5 s, not 0.5 s.
        #expect((clock.now - start).seconds > 1.3)
    }

    @Test func aQueueRunsAFewAtATimeWithOneProgress() async throws {
        let api = try await faultManager()
        let directory = try DownloadTests.temporaryDirectory()
        let queue = TransferQueue(maximumConcurrentTasks: 2)
        let running = Counter()
        for index in 0..<5 {
            queue.add {
                api.downloadTask(
                    "bytes", parameters: ["n": 200_000, "i": .int(index)],
                    to: directory.appendingPathComponent("\(index)"))
            }
        }
        let watcher = Task {
            var values: [TransferProgress] = []
            for await progress in queue.progress { values.append(progress) }
            return values
        }
        try await queue.waitForAll()
        _ = running
        let values = await watcher.value
        #expect(values.last?.completedBytes == 1_000_000)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
        for index in 0..<5 {
            #expect(try Data(contentsOf: directory.appendingPathComponent("\(index)")) == faultBytes(200_000))
        }
    }

    @Test func aQueueCanCancelTheRestWhenOneFails() async throws {
        let api = try await faultManager()
        let queue = TransferQueue(maximumConcurrentTasks: 2, cancelsRemainingOnFailure: true)
        // 100 s of drip: still running when the failure cancels it, however loaded the machine
        // (10 s was not always enough under ThreadSanitizer with the whole suite).
        let slow = api.dataTask(
            .get, "drip", parameters: ["n": 100, "delay": 1000], serializer: DataResponseSerializer())
        slow.suspend()
        queue.add { () -> DataTask<Data> in
            slow.resume()
            return slow
        }
        queue.add { api.dataTask(.get, "status/500", serializer: DataResponseSerializer()) }
        let started = Counter()
        for _ in 0..<3 {
            queue.add { () -> DataTask<Data> in
                Task { await started.add(1) }
                return api.dataTask(.get, "bytes", serializer: DataResponseSerializer())
            }
        }
        let error = await capturedError { try await queue.waitForAll() }
        #expect(isCourierError(error!) { if case .unacceptableStatusCode = $0 { true } else { false } })
        await #expect(throws: CancellationError.self) { _ = try await slow.response }
        try await Task.sleep(for: .milliseconds(100))
        #expect(await started.value == 0)
    }
}
