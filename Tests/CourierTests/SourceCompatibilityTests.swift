import Courier
import Foundation
import Testing

/// Calls as code written against an earlier release makes them: a call that was renamed keeps
/// a deprecated overload that forwards to the new one, with the type it returned then.
///
/// The deprecated calls are made from deprecated methods that witness a protocol's
/// requirements, so that this suite, built with warnings as errors, compiles them without a
/// deprecation warning of its own: what is checked is that they compile and behave.
@Suite struct SourceCompatibilityTests {
    @Test func eventsWithAReconnectionDelayStillCompilesAndReconnects() async throws {
        let api = try await faultManager()
        let name = "events-legacy-\(UUID().uuidString.prefix(8))"
        let caller: any LastReleasesCalls = LastReleasesCaller()
        var received: [String] = []
        for try await event in caller.events(api, "events/\(name)", reconnectionDelay: .milliseconds(300)) {
            received.append(event.data)
            if event.event == "done" { break }
        }
        // Both connections' events: the stream reconnected with Last-Event-ID, as before.
        #expect(received == ["hello", "line one\nline two", "three", "four", "bye"])
    }
}

/// Calls whose spelling changed since, as they were written.
private protocol LastReleasesCalls {
    func events(
        _ api: HTTPSessionManager, _ path: String, reconnectionDelay: Duration
    ) -> AsyncThrowingStream<ServerSentEvent, any Error>
}

private struct LastReleasesCaller: LastReleasesCalls {
    @available(*, deprecated)
    func events(
        _ api: HTTPSessionManager, _ path: String, reconnectionDelay: Duration
    ) -> AsyncThrowingStream<ServerSentEvent, any Error> {
        api.events(path, reconnectionDelay: reconnectionDelay)
    }
}
