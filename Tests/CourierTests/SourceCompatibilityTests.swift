import Courier
import Foundation
import Testing

/// Calls as code written against an earlier state of the API makes them: a call that was
/// renamed or removed keeps a deprecated overload that forwards to the new one, with the type
/// it returned then (README.md, "Versions and what they promise").
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

    @Test func aRawResponseMadeWithItsURLStillCompilesAndItsURLCanBeSet() throws {
        let caller: any LastReleasesCalls = LastReleasesCaller()
        let first = try #require(URL(string: "https://example.com/first"))
        var raw = caller.rawResponse(
            HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/"), url: first)
        #expect(raw.url == first)
        #expect(raw.request.url == first)
        #expect(raw.status == .ok)
        // The URL was a stored property then: setting it sets the request's.
        let second = try #require(URL(string: "https://example.com/second"))
        raw.url = second
        #expect(raw.request.url == second)
        // A DataResponse's too.
        var response = DataResponse(raw: raw, value: 1)
        let third = try #require(URL(string: "https://example.com/third"))
        response.url = third
        #expect(response.request.url == third)
        #expect(response.url == third)
    }
}

/// Calls whose spelling changed since, as they were written.
private protocol LastReleasesCalls {
    func rawResponse(_ request: HTTPRequest, url: URL) -> RawResponse

    func events(
        _ api: HTTPSessionManager, _ path: String, reconnectionDelay: Duration
    ) -> AsyncThrowingStream<ServerSentEvent, any Error>
}

private struct LastReleasesCaller: LastReleasesCalls {
    @available(*, deprecated)
    func rawResponse(_ request: HTTPRequest, url: URL) -> RawResponse {
        RawResponse(request: request, url: url, response: HTTPResponse(status: .ok), data: Data())
    }

    @available(*, deprecated)
    func events(
        _ api: HTTPSessionManager, _ path: String, reconnectionDelay: Duration
    ) -> AsyncThrowingStream<ServerSentEvent, any Error> {
        api.events(path, reconnectionDelay: reconnectionDelay)
    }
}
