import Courier
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

@testable import CourierOpenAPI

/// A client generated from OpenAPI/openapi.yaml (scripts/generate-openapi), sending through
/// `CourierClientTransport` to the fault server: bodies streamed both ways, cancellation, the
/// manager's interceptors and retry policy, statuses other than 2xx.
@Suite struct OpenAPITests {
    /// The generated client over a manager on the fault server configured by `configure`.
    static func client(
        _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) async throws -> (Client, HTTPSessionManager) {
        let api = try await faultManager(configure)
        let client = Client(serverURL: try await TestServers.fault(), transport: CourierClientTransport(manager: api))
        return (client, api)
    }

    static func name(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8))" }

    /// The fault server's counts for `name`.
    static func stats(_ client: Client, _ name: String) async throws -> Components.Schemas.Stats {
        try await client.getStats(path: .init(name: name)).ok.body.json
    }

    /// Whether `chunk` holds the fault server's pattern bytes from `offset` on.
    static func matchesPattern(_ chunk: ArraySlice<UInt8>, at offset: Int64) -> Bool {
        var expected = UInt8(offset % 251)
        for byte in chunk {
            guard byte == expected else { return false }
            expected = expected == 250 ? 0 : expected + 1
        }
        return true
    }

    /// Adds a header to every request of the session.
    struct TagInterceptor: RequestInterceptor {
        func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
            var request = request
            request.headerFields[HTTPField.Name("X-Session-Tag")!] = "from-the-manager"
            return request
        }
    }

    @Test func aJSONOperationGoesThroughTheManagersInterceptors() async throws {
        let (client, _) = try await Self.client { $0.interceptors = [TagInterceptor()] }
        let item = Components.Schemas.Item(name: "crate", count: 3, tags: ["a", "b"])
        let echo = try await client.echoJSON(body: .json(item)).ok.body.json
        #expect(echo.method == "PUT")
        #expect(echo.path == "/echo")
        #expect(echo.headers.additionalProperties["Content-Type"] == "application/json; charset=utf-8")
        #expect(echo.headers.additionalProperties["X-Session-Tag"] == "from-the-manager")
        #expect(echo.headers.additionalProperties["User-Agent"]?.hasPrefix("Courier/") == true)
        // A small JSON body is sent from memory, with its length; the bytes are the generated
        // client's encoding (its default: sorted keys, pretty-printed).
        #expect(echo.chunked == false)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let json = try encoder.encode(item)
        #expect(echo.headers.additionalProperties["Content-Length"] == "\(json.count)")
        #expect(echo.bodyLength == Int64(json.count))
        #expect(echo.sha256 == SHA256.hex(json))
    }

    @Test func queryAndHeaderParametersArriveEncoded() async throws {
        let (client, _) = try await Self.client()
        let echo = try await client.echoBytes(
            query: .init(label: "a b&c=d/é"), headers: .init(X_hyphen_Label: "tag-1"), body: .binary(HTTPBody("hi"))
        ).ok.body.json
        #expect(echo.method == "POST")
        #expect(echo.query == "label=a%20b%26c%3Dd%2F%C3%A9")
        #expect(echo.headers.additionalProperties["X-Label"] == "tag-1")
        #expect(echo.headers.additionalProperties["Content-Type"] == "application/octet-stream")
        #expect(echo.bodyLength == 2)
    }

    @Test func aStreamedUploadOfUnknownLengthIsSentChunked() async throws {
        let (client, _) = try await Self.client()
        let chunkSize = 64 << 10
        let chunks = 128  // 8 MiB
        let expected = faultBytes(chunkSize * chunks)
        let (stream, continuation) = AsyncStream<ArraySlice<UInt8>>.makeStream(bufferingPolicy: .bufferingOldest(4))
        let producer = Task {
            for index in 0..<chunks {
                let slice = ArraySlice(expected[(index * chunkSize)..<((index + 1) * chunkSize)])
                while case .dropped = continuation.yield(slice) { try await Task.sleep(for: .milliseconds(1)) }
            }
            continuation.finish()
        }
        let echo = try await client.echoBytes(body: .binary(HTTPBody(stream, length: .unknown))).ok.body.json
        try await producer.value
        #expect(echo.chunked == true)
        #expect(echo.bodyLength == Int64(expected.count))
        #expect(echo.sha256 == SHA256.hex(expected))
    }

    @Test func aStreamedUploadOfKnownLengthIsSentWithItsLength() async throws {
        let (client, _) = try await Self.client()
        let expected = faultBytes(3 << 20)
        let pieces = stride(from: 0, to: expected.count, by: 100_000).map {
            ArraySlice(expected[$0..<min($0 + 100_000, expected.count)])
        }
        let body = HTTPBody(pieces.async, length: .known(Int64(expected.count)), iterationBehavior: .single)
        let echo = try await client.echoBytes(body: .binary(body)).ok.body.json
        #expect(echo.chunked == false)
        #expect(echo.headers.additionalProperties["Content-Length"] == "\(expected.count)")
        #expect(echo.bodyLength == Int64(expected.count))
        #expect(echo.sha256 == SHA256.hex(expected))
    }

    @Test func aStreamedBodyShorterThanItsDeclaredLengthFailsTheRequest() async throws {
        let (client, _) = try await Self.client()
        let pieces = [ArraySlice(faultBytes(1000)), ArraySlice(faultBytes(1000))]
        let body = HTTPBody(pieces.async, length: .known(5000), iterationBehavior: .single)
        let error = await capturedError { _ = try await client.echoBytes(body: .binary(body)) }
        let underlying = (error as? ClientError)?.underlyingError
        #expect(isCourierError(underlying) { if case .serializationFailed = $0 { true } else { false } })
        #expect("\(underlying.map { "\($0)" } ?? "")".contains("ended after 2000 of its declared 5000 bytes"))
    }

    @Test func anUploadReadsItsSourceOnlyAsFastAsItIsSent() async throws {
        let (client, _) = try await Self.client()
        let source = EndlessBytes()
        let body = HTTPBody(source, length: .unknown, iterationBehavior: .single)
        let call = Task { try await client.holdBody(body: .binary(body)) }
        // The server reads none of the body: once the socket's buffers and the 1 MiB the
        // bridge keeps are full, the source is not read any further. Wait until reading has
        // started, then until it has stood still for 500 ms (two minutes at most each, counted
        // apart: on a loaded machine, under a sanitizer, the pump's task waits for a thread and
        // the buffers take a while to fill; a run of the whole suite under ThreadSanitizer was
        // still filling them at 4 MB when one shared deadline ran out).
        let deadline = ContinuousClock.now + .seconds(120)
        while source.produced.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        var produced = source.produced.load(ordering: .relaxed)
        var stoodStill = false
        let fillDeadline = ContinuousClock.now + .seconds(120)
        while !stoodStill, ContinuousClock.now < fillDeadline {
            try await Task.sleep(for: .milliseconds(500))
            let now = source.produced.load(ordering: .relaxed)
            stoodStill = now == produced
            produced = now
        }
        #expect(produced > 0)
        #expect(stoodStill, "still reading a source the server never reads: \(produced) bytes so far")
        #expect(produced < 64 << 20, "read \(produced) bytes of a source the server never reads")
        call.cancel()
        // The server never answers: had the cancellation not reached the transfer, the call
        // would end with the request timeout's error instead.
        let error = await capturedError { _ = try await call.value }
        #expect((error as? ClientError)?.underlyingError is CancellationError || error is CancellationError)
    }

    @Test func aDownloadStreamsWithBackpressure() async throws {
        let (client, _) = try await Self.client()
        let name = Self.name("openapi-download")
        let total: Int64 = 48 << 20
        let output = try await client.getFile(path: .init(name: name), query: .init(n: total))
        let body = try output.ok.body.binary
        #expect(body.length == .known(total))
        var iterator = body.makeAsyncIterator()
        let first = try await iterator.next()
        #expect(first?.isEmpty == false)
        // The reader has taken one chunk: the transfer pauses once 2 MiB wait for it, so the
        // server has sent only what the buffers on the way hold.
        try await Task.sleep(for: .milliseconds(500))
        let sentWhilePaused = try await Self.stats(client, name).bytesSent
        #expect(sentWhilePaused < 24 << 20, "the server sent \(sentWhilePaused) bytes to a reader that took one chunk")
        var received = Int64(first?.count ?? 0)
        var intact = Self.matchesPattern(first ?? [], at: 0)
        while let chunk = try await iterator.next() {
            intact = intact && Self.matchesPattern(chunk, at: received)
            received += Int64(chunk.count)
        }
        #expect(received == total)
        #expect(intact)
    }

    @Test func cancellingTheBodyReaderCancelsTheDownload() async throws {
        let (client, _) = try await Self.client()
        let name = Self.name("openapi-cancel")
        let total: Int64 = 256 << 20
        let body = try await client.getFile(path: .init(name: name), query: .init(n: total)).ok.body.binary
        let reader = Task {
            var count = 0
            for try await chunk in body {
                count += chunk.count
                try await Task.sleep(for: .milliseconds(20))
            }
            return count
        }
        try await Task.sleep(for: .milliseconds(300))
        reader.cancel()
        let error = await capturedError { _ = try await reader.value }
        #expect(error is CancellationError)
        try await Task.sleep(for: .milliseconds(300))
        let sent = try await Self.stats(client, name).bytesSent
        #expect(sent < 64 << 20, "the server sent \(sent) of \(total) bytes after the reader was cancelled")
    }

    @Test func cancellingTheCallerCancelsAnOperationWaitingForItsHead() async throws {
        let (client, _) = try await Self.client()
        let call = Task { try await client.getSilent() }
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        // The server never answers: had the cancellation not reached the transfer, the call
        // would end with the request timeout's error instead.
        let error = await capturedError { _ = try await call.value }
        #expect((error as? ClientError)?.underlyingError is CancellationError || error is CancellationError)
    }

    @Test func statusesOutside2xxAreResponsesWithTheirBodies() async throws {
        let (client, _) = try await Self.client()
        let ok = try await client.getStatus(path: .init(code: 200))
        #expect(try await String(collecting: ok.ok.body.plainText, upTo: 100) == "status 200")
        let notFound = try await client.getStatus(path: .init(code: 404))
        guard case .default(let status, let response) = notFound else {
            Issue.record("expected the default response, got \(notFound)")
            return
        }
        #expect(status == 404)
        #expect(try await String(collecting: response.body.plainText, upTo: 100) == "status 404")
    }

    @Test func theManagersRetryPolicyRetriesAnOperation() async throws {
        // No deadline: under a sanitizer, the first attempt alone may take longer than the
        // default 30 s, and the test is about the retry, not its deadline.
        let (retrying, _) = try await Self.client {
            $0.interceptors = [RetryPolicy(initialDelay: .milliseconds(50), deadline: nil)]
        }
        let name = Self.name("openapi-flaky")
        let attempt = try await retrying.getFlaky(path: .init(name: name), query: .init(fail: 1)).ok.body.json
        #expect(attempt.attempt == 2)
        #expect(attempt.method == "GET")
        // Without the policy the 503 is the answer, with its body.
        let (plain, _) = try await Self.client()
        let failed = try await plain.getFlaky(path: .init(name: Self.name("openapi-flaky")), query: .init(fail: 1))
        let unavailable = try failed.serviceUnavailable
        #expect(try await String(collecting: unavailable.body.plainText, upTo: 100) == "flaky 1\n")
    }

    @Test func documentsAreReadWholeAndEverythingElseStreams() {
        #expect(HTTPSessionManager.readsWhole(accepting: ["application/json"]))
        #expect(HTTPSessionManager.readsWhole(accepting: ["application/json, application/problem+json"]))
        #expect(HTTPSessionManager.readsWhole(accepting: ["text/plain;q=0.5, Application/JSON"]))
        #expect(!HTTPSessionManager.readsWhole(accepting: []))
        #expect(!HTTPSessionManager.readsWhole(accepting: ["*/*"]))
        #expect(!HTTPSessionManager.readsWhole(accepting: ["application/octet-stream"]))
        #expect(!HTTPSessionManager.readsWhole(accepting: ["application/json", "application/jsonl"]))
        #expect(!HTTPSessionManager.readsWhole(accepting: ["text/event-stream"]))
    }

    @Test func cancellingTheCallerCancelsARequestReadWhole() async throws {
        let api = try await faultManager()
        let transport = CourierClientTransport(manager: api)
        let request = HTTPRequest(
            method: .get, scheme: nil, authority: nil, path: "/silent", headerFields: [.accept: "application/json"])
        let baseURL = try await TestServers.fault()
        let call = Task { try await transport.send(request, body: nil, baseURL: baseURL, operationID: "silent") }
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        // The server never answers: had the cancellation not reached the transfer, the call
        // would end with the request timeout's error instead.
        let error = await capturedError { _ = try await call.value }
        #expect(error is CancellationError)
    }

    /// A request read whole is one of the manager's tasks while it runs, as a streamed one is:
    /// `cancelAllTasks()` reaches it (and `finishTasksAndInvalidate()`, a service's shutdown,
    /// waits for it).
    @Test func aRequestReadWholeIsAmongTheManagersTasks() async throws {
        let api = try await faultManager()
        let transport = CourierClientTransport(manager: api)
        let request = HTTPRequest(
            method: .get, scheme: nil, authority: nil, path: "/silent", headerFields: [.accept: "application/json"])
        let baseURL = try await TestServers.fault()
        let call = Task { try await transport.send(request, body: nil, baseURL: baseURL, operationID: "silent") }
        // Listed once the call reaches the manager (a bound only so that a failure ends).
        for _ in 0..<6000 where api.tasks.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        let listed = try #require(api.tasks.first)
        #expect(api.tasks.count == 1)
        #expect(listed.kind == .data)
        #expect(listed.path.hasSuffix("/silent"), "\(listed.path)")
        api.cancelAllTasks()
        // The server never answers: only the cancellation ends the call.
        let error = await capturedError { _ = try await call.value }
        #expect(error is CancellationError, "\(String(describing: error))")
        #expect(api.tasks.isEmpty)
    }

    @Test func aDocumentIsReadWholeWithItsLength() async throws {
        let api = try await faultManager()
        let transport = CourierClientTransport(manager: api)
        let request = HTTPRequest(
            method: .get, scheme: nil, authority: nil, path: "/bytes?n=70000", headerFields: [.accept: "text/plain"])
        let (response, body) = try await transport.send(
            request, body: nil, baseURL: try await TestServers.fault(), operationID: "bytes")
        #expect(response.status == .ok)
        let received = try #require(body)
        #expect(received.length == .known(70000))
        #expect(Data(try await [UInt8](collecting: received, upTo: 1 << 20)) == faultBytes(70000))
    }

    @Test func theServerURLsPathIsKept() {
        var request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/echo?x=1")
        #expect(
            CourierClientTransport.url(of: request, relativeTo: URL(string: "http://h:1/v1/")!)
                == "http://h:1/v1/echo?x=1")
        request.path = "/a%20b"
        #expect(CourierClientTransport.url(of: request, relativeTo: URL(string: "https://h")!) == "https://h/a%20b")
    }
}

/// 64 KiB chunks forever, counting what was taken.
final class EndlessBytes: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let produced = Atomic<Int>(0)
    static let chunk = ArraySlice([UInt8](repeating: 0x61, count: 64 << 10))

    struct Iterator: AsyncIteratorProtocol {
        let source: EndlessBytes
        func next() async throws -> ArraySlice<UInt8>? {
            try Task.checkCancellation()
            source.produced.add(EndlessBytes.chunk.count, ordering: .relaxed)
            return EndlessBytes.chunk
        }
    }

    func makeAsyncIterator() -> Iterator { Iterator(source: self) }
}
