import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Testing

// Helpers for the pipeline's tests on the stub transport: no server, no child process.

/// The base URL of the stubbed API every test here talks to.
let stubBaseURL = URL(string: "https://api.example.com/v1/")!

/// A manager for `stubBaseURL` on `stub`, with an ephemeral configuration: nothing on disk, an
/// HTTP cache of 8 MiB in memory.
func stubbedManager(
    _ stub: StubTransport, _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
) -> HTTPSessionManager {
    var configuration = HTTPSessionConfiguration.ephemeral
    configuration.transport = stub.transport
    configure(&configuration)
    return HTTPSessionManager(baseURL: stubBaseURL, configuration: configuration)
}

/// Whether `error` is the `CourierError` case `matching` picks out.
func isCourierError(_ error: (any Error)?, _ matching: (CourierError) -> Bool) -> Bool {
    guard let error = error as? CourierError else { return false }
    return matching(error)
}

/// The status of the response a `CourierError` carries (an `unacceptableStatusCode`, say).
func statusCode(of error: (any Error)?) -> Int? {
    (error as? CourierError)?.response?.status.code
}

/// Runs `body` and returns the error it threw, or records an issue if it did not throw.
func capturedError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> (any Error)? {
    do {
        try await body()
        Issue.record("expected an error", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// `Basic` credentials as the stub sends them.
func basicAuthorization(_ user: String, _ password: String) -> String {
    "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
}

extension Array where Element: Sendable {
    /// The elements as an `AsyncSequence` (an upload's stream body), then its end.
    var async: AsyncStream<Element> {
        AsyncStream { continuation in
            for element in self { continuation.yield(element) }
            continuation.finish()
        }
    }
}

/// An event monitor that keeps every event it is given.
final class EventRecorder: EventMonitor {
    let events = Locked<[RequestEvent]>([])

    func handle(_ event: RequestEvent) async {
        events.withLock { $0.append(event) }
    }

    /// The events, once `count` requests have ended (`finished` or `failed`). Monitors hear
    /// of events on a task of their own, after the call may have returned; this waits for
    /// them, up to a minute (a bound for a broken test, not a measure: it returns as soon as
    /// they are in).
    func events(afterEndings count: Int = 1) async -> [RequestEvent] {
        await waitUntil { events in events.filter(\.isEnding).count >= count }
        return events.withLock { $0 }
    }

    /// The events' names, once `count` requests have ended.
    func names(afterEndings count: Int = 1) async -> [String] {
        await events(afterEndings: count).map(\.name)
    }

    /// Waits (up to a minute) until `condition` holds for the events so far.
    func waitUntil(_ condition: ([RequestEvent]) -> Bool) async {
        let deadline = ContinuousClock.now + .seconds(60)
        while !events.withLock({ condition($0) }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// The retry decisions so far: the attempt that failed, its error, the decision.
    var decisions: [(attempt: Int, error: any Error, decision: RetryDecision)] {
        events.withLock { events in
            events.compactMap { event in
                if case .retryDecided(let attempt, let error, let decision) = event.kind {
                    return (attempt, error, decision)
                }
                return nil
            }
        }
    }
}

extension RequestEvent {
    /// The request's last event: `finished` or `failed`.
    var isEnding: Bool {
        switch kind {
        case .finished, .failed: true
        default: false
        }
    }
}

/// Waits (up to a minute) until `condition` holds: for what happens behind a call's back (a
/// background revalidation). Returns whether it held.
@discardableResult
func eventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(60)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}
