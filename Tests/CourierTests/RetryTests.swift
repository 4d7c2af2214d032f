@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// `RetryPolicy` against the fault server, end to end: a retried status, `Retry-After` waited
/// for, a refused connection retried until the deadline, downloads and byte streams that
/// continue or stop. Which statuses, failures and methods are retried, the backoff and the
/// budget are tested on the stub: CourierPipelineTests' `RetryPolicyTests`.
@Suite struct RetryTests {
    typealias Recorder = EventMonitorTests.Recorder

    /// A manager on the fault server whose requests retry with `policy`, and the events.
    /// A manager with `policy`. The tests' policies have no deadline unless a test is about it:
    /// under a sanitizer with the whole suite running, a first attempt has taken longer than
    /// the default 30 s, and its retry, the point of the test, was then not made.
    static func manager(_ policy: RetryPolicy) async throws -> (HTTPSessionManager, Recorder) {
        let recorder = Recorder()
        let api = try await faultManager {
            $0.interceptors = [policy]
            $0.eventMonitors = [recorder]
        }
        return (api, recorder)
    }

    /// The fault server's record of `name`, read without a retry policy.
    static func stats(_ name: String) async throws -> JSON {
        try await faultManager().GET("stats/\(name)")
    }

    /// The retry decisions among `recorder`'s events, once the request has finished or failed
    /// (waits up to 10 s).
    static func decisions(_ recorder: Recorder) async -> [(Int, any Error, RetryDecision)] {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline,
            !recorder.events.withLock({ $0.contains { ["finished", "failed"].contains($0.name) } })
        {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return recorder.events.withLock { events in
            events.compactMap { event in
                if case .retryDecided(let attempt, let error, let decision) = event.kind {
                    return (attempt, error, decision)
                }
                return nil
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func name(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8))" }

    @Test func a503IsRetriedAndTheDelayIsInTheEvent() async throws {
        let (api, recorder) = try await Self.manager(RetryPolicy(initialDelay: .milliseconds(200), deadline: nil))
        let name = Self.name("flaky")
        let reply: JSON = try await api.GET("flaky/\(name)", parameters: ["fail": 1, "status": 503])
        #expect(reply["attempt"] == 2)
        let decisions = await Self.decisions(recorder)
        try #require(decisions.count == 1)
        #expect(decisions[0].0 == 1)
        #expect(isCourierError(decisions[0].1) { $0.response?.status.code == 503 })
        switch decisions[0].2 {
        case .retry: break  // a jittered wait of zero
        case .retryAfter(let delay): #expect(delay <= .milliseconds(200))
        case .doNotRetry: Issue.record("the 503 was not retried")
        }
        #expect(try await Self.stats(name)["requests"] == 2)
    }

    @Test(arguments: ["2", "date+600"])
    func retryAfterIsHonoured(_ retryAfter: String) async throws {
        // A cap of 2 s: an HTTP date 10 minutes ahead waits exactly that (a date that did not
        // parse would wait the 1 ms backoff), however slowly a sanitizer lets the answer through.
        let policy = RetryPolicy(initialDelay: .milliseconds(1), deadline: nil, maximumRetryAfter: .seconds(2))
        let (api, recorder) = try await Self.manager(policy)
        let name = Self.name("retry-after")
        let reply: JSON = try await api.GET(
            "flaky/\(name)", parameters: ["fail": 1, "status": 429, "retry-after": .string(retryAfter)])
        #expect(reply["attempt"] == 2)
        let decisions = await Self.decisions(recorder)
        guard case .retryAfter(let delay) = decisions.first?.2 else {
            Issue.record("expected a wait, got \(decisions.map(\.2))")
            return
        }
        #expect(delay == .seconds(2))
        let times = try await Self.stats(name)["times"].arrayValue?.compactMap(\.doubleValue) ?? []
        try #require(times.count == 2)
        #expect(times[1] - times[0] >= Self.seconds(delay) - 0.05)
    }

    @Test func aPOSTIsNotRetriedUnlessAllowed() async throws {
        let (api, _) = try await Self.manager(RetryPolicy(initialDelay: .milliseconds(1), deadline: nil))
        let name = Self.name("post")
        let error = await capturedError {
            let _: JSON = try await api.POST("flaky/\(name)", parameters: ["fail": 1, "x": 1])
        }
        #expect(isCourierError(error) { $0.response?.status.code == 503 })
        #expect(try await Self.stats(name)["requests"] == 1)

        // Allowed: sent again, body and all.
        var policy = RetryPolicy(initialDelay: .milliseconds(1), deadline: nil)
        policy.retryableMethods.insert(.post)
        let (allowing, _) = try await Self.manager(policy)
        let again = Self.name("post-allowed")
        let reply: JSON = try await allowing.POST("flaky/\(again)?fail=1", parameters: ["x": 1])
        #expect(reply == ["attempt": 2, "method": "POST"])
    }

    @Test func aRefusedConnectionIsRetriedUntilTheDeadline() async throws {
        // Port 1: nothing listens there, and no test server can take it (unlike a port that
        // was free a moment ago).
        let port = 1
        let policy = RetryPolicy(
            maximumAttempts: 1000, initialDelay: .milliseconds(50), maximumDelay: .milliseconds(100),
            deadline: .seconds(2), budget: nil)
        let (api, recorder) = try await Self.manager(policy)
        let started = ContinuousClock.now
        let error = await capturedError {
            let _: JSON = try await api.GET("http://127.0.0.1:\(port)/")
        }
        let elapsed = ContinuousClock.now - started
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
        let decisions = await Self.decisions(recorder)
        // Attempts until the deadline (the last gave up because its wait would end past it:
        // at least 2 s less the longest wait had passed), well before 1000 of them. How many
        // depends on how fast the machine refuses a connection.
        #expect(elapsed >= .milliseconds(1900))
        #expect(decisions.count < 1000)
        #expect(decisions.last?.2 == .doNotRetry)
        #expect(decisions.dropLast().allSatisfy { $0.2 != .doNotRetry })
        // No attempt started after the deadline: the waits add up to less than it.
        let waited = decisions.reduce(Duration.zero) { total, decision in
            if case .retryAfter(let delay) = decision.2 { return total + delay }
            return total
        }
        #expect(waited <= .seconds(2))
        #expect(elapsed >= waited)
    }

    @Test func aDownloadCutHalfWayContinuesFromTheBytesOnDisk() async throws {
        let (api, recorder) = try await Self.manager(RetryPolicy(initialDelay: .milliseconds(10), deadline: nil))
        let name = Self.name("cut")
        let total = 1_000_000
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let task = api.downloadTask(
            "file/\(name)", parameters: ["n": .int(total), "drop-after": .int(total / 2)], to: destination)
        var seen: [TransferProgress] = []
        for await progress in task.downloadProgress { seen.append(progress) }
        let response = try await task.value
        #expect(response == destination)
        #expect(try Data(contentsOf: destination) == faultBytes(total))
        #expect(try DownloadTests.contents(directory) == ["file.bin"])
        // The second request asked for the missing half only, and nothing was sent twice.
        let stats = try await Self.stats(name)
        #expect(stats["ranges"] == [nil, .string("bytes=\(total / 2)-")])
        #expect(stats["bytesSent"] == .int(total))
        // Progress never went back, and ended at the whole file.
        let completed = seen.map(\.completedBytes)
        #expect(completed == completed.sorted())
        #expect(seen.last?.completedBytes == Int64(total))
        let decisions = await Self.decisions(recorder)
        #expect(decisions.count == 1)
        #expect(isCourierError(decisions.first?.1) { if case .connectionLost = $0 { true } else { false } })
    }

    /// Cancelled while it waits to try again, a download still gives its resume data: the
    /// partial file of the failed attempt is not lost.
    @Test func aDownloadCancelledBetweenAttemptsKeepsItsBytes() async throws {
        let waits = Interceptor(retry: { _, _, _ in .retryAfter(.seconds(30)) })
        let recorder = Recorder()
        let api = try await faultManager {
            $0.interceptors = [waits]
            $0.eventMonitors = [recorder]
        }
        let name = Self.name("cut-cancel")
        let total = 1_000_000
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let task = api.downloadTask(
            "file/\(name)", parameters: ["n": .int(total), "drop-after": .int(total / 2)], to: destination)
        // Wait for the retry decision: the first attempt has failed and kept its bytes. (A
        // generous limit: under a sanitizer, with the whole suite running, it can take long.)
        let deadline = ContinuousClock.now + .seconds(120)
        while !recorder.events.withLock({ $0.contains { $0.name == "retryDecided" } }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try #require(recorder.events.withLock { $0.contains { $0.name == "retryDecided" } })
        let resumeData = try #require(await task.cancel(producingResumeData: true))
        #expect(resumeData.bytesWritten == Int64(total / 2))
        let resumed = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        #expect(try Data(contentsOf: resumed) == faultBytes(total))
        #expect(try await Self.stats(name)["ranges"] == [nil, .string("bytes=\(total / 2)-")])
    }

    /// An attempt that fails before its transfer (an adapter threw) leaves the download's
    /// partial file readied; the attempt after it continues it all the same.
    @Test func aDownloadContinuesAfterAnAttemptThatSentNothing() async throws {
        struct AdapterFailed: Error {}
        let flaky = Interceptor(
            adapt: { request, context in
                if context.attempt == 2 { throw AdapterFailed() }
                return request
            },
            retry: { _, _, context in context.attempt < 3 ? .retry : .doNotRetry })
        let api = try await faultManager { $0.interceptors = [flaky] }
        let name = Self.name("cut-adapt")
        let total = 600_000
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let file = try await api.downloadTask(
            "file/\(name)", parameters: ["n": .int(total), "drop-after": 200_000], to: destination
        ).value
        #expect(try Data(contentsOf: file) == faultBytes(total))
        #expect(try await Self.stats(name)["ranges"] == [nil, "bytes=200000-"])
    }

    @Test func aByteStreamIsRetriedOnlyBeforeItsFirstChunk() async throws {
        let (api, _) = try await Self.manager(RetryPolicy(initialDelay: .milliseconds(1), deadline: nil))
        // A 503 hands nothing to the consumer: tried again.
        let name = Self.name("stream")
        var body = Data()
        for try await chunk in api.bytes(.get, "flaky/\(name)", parameters: ["fail": 1]) { body.append(chunk) }
        #expect(try JSON(parsing: body)["attempt"] == 2)
        // Cut after the consumer had bytes: not tried again.
        let cut = Self.name("stream-cut")
        var received = 0
        let error = await capturedError {
            for try await chunk in api.bytes(.get, "file/\(cut)", parameters: ["n": 400_000, "drop-after": 200_000]) {
                received += chunk.count
            }
        }
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
        #expect(received <= 200_000)
        #expect(try await Self.stats(cut)["requests"] == 1)
    }
}
