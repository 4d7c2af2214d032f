import CourierTesting
import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// `HARRecorder` and `StubTransport(replaying:)`: exchanges recorded against the fault server,
/// then replayed with no server at all, give the same responses.
@Suite struct HARTests {
    private let anyStatus = DataResponseSerializer(acceptableStatusCodes: 100..<600)

    private static func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("courier-\(UUID().uuidString).har")
    }

    @Test func aRecordedSessionReplaysWithoutTheServer() async throws {
        let fault = try await TestServers.fault()
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let recorder = HARRecorder(file: file)
        let recording = try await faultManager { $0.eventMonitors = [recorder] }
        let paths = [
            "bytes?n=3000", "problem/403", "redirect?to=/bytes%3Fn%3D10", "chunked?n=500&chunk=70",
            "coded?ce=gzip&n=2000",
        ]
        var recorded: [DataResponse<Data>] = []
        let began = Date()
        for path in paths {
            recorded.append(
                try await recording.request(
                    .get, path, headers: ["Authorization": "Bearer secret-token"], serializer: anyStatus))
        }

        // The archive: HAR 1.2, one entry per hop (the redirect is two), secrets redacted.
        let archive = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
        let log = try #require(archive["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        let entries = try #require(log["entries"] as? [[String: Any]])
        #expect(entries.count == paths.count + 1)
        // Each entry's start is ISO 8601 with milliseconds (`2026-11-29T13:10:32.123Z`), from
        // this run, in the order the requests went.
        let started = try entries.map { entry in
            let text = try #require(entry["startedDateTime"] as? String)
            #expect(text.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(text)")
            return try Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        }
        // (A second's slack: the field keeps milliseconds, and a test slowed by a sanitizer
        // may take minutes, so the bound is the run's own start, not a duration.)
        #expect(started == started.sorted() && started[0] >= began - 1 && started[started.count - 1] <= Date())
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(!text.contains("secret-token"))
        #expect(text.contains("<redacted>"))

        // Replayed, with the server nowhere: the same statuses, fields and bodies.
        var configuration = HTTPSessionConfiguration.ephemeral
        let stub = try StubTransport(replaying: file)
        configuration.transport = stub.transport
        let replaying = HTTPSessionManager(baseURL: fault, configuration: configuration)
        for (path, original) in zip(paths, recorded) {
            let replayed = try await replaying.request(.get, path, serializer: anyStatus)
            #expect(replayed.status == original.status, "\(path)")
            #expect(replayed.data == original.data, "\(path)")
            #expect(replayed.headerFields[.contentType] == original.headerFields[.contentType], "\(path)")
        }

        // A request the archive does not have fails, naming the closest entry.
        let error = await capturedError { _ = try await replaying.request(.get, "bytes?n=3001", serializer: anyStatus) }
        guard case .transport(let context)? = error as? CourierError else {
            Issue.record("expected a transport error, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("No exchange in \(file.lastPathComponent) answers GET"))
        #expect(context.message.contains("the closest recorded is GET \(fault.absoluteString)bytes?n=3000"))
    }

    @Test func replayMatchesOnTheChosenFieldsAndInOrder() async throws {
        let fault = try await TestServers.fault()
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let recording = try await faultManager { $0.eventMonitors = [HARRecorder(file: file)] }
        let name = "har-\(UUID().uuidString.prefix(8))"
        for tenant in ["a", "b"] {
            _ = try await recording.request(
                .get, "cache-probe/\(name)", headers: ["X-Tenant": tenant], serializer: anyStatus)
        }
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = try StubTransport(replaying: file, matching: [HTTPField.Name("X-Tenant")!]).transport
        let replaying = HTTPSessionManager(baseURL: fault, configuration: configuration)
        let b = try await replaying.request(
            .get, "cache-probe/\(name)", headers: ["X-Tenant": "b"], serializer: anyStatus)
        #expect(String(decoding: b.data, as: UTF8.self) == "response 2")
        let a = try await replaying.request(
            .get, "cache-probe/\(name)", headers: ["X-Tenant": "a"], serializer: anyStatus)
        #expect(String(decoding: a.data, as: UTF8.self) == "response 1")

        // Without the field, the entries answer in order, the last one again after them.
        var inOrder = HTTPSessionConfiguration.ephemeral
        inOrder.transport = try StubTransport(replaying: file).transport
        let plain = HTTPSessionManager(baseURL: fault, configuration: inOrder)
        var bodies: [String] = []
        for _ in 0..<3 {
            bodies.append(
                String(
                    decoding: try await plain.request(.get, "cache-probe/\(name)", serializer: anyStatus).data,
                    as: UTF8.self))
        }
        #expect(bodies == ["response 1", "response 2", "response 2"])
        #expect(throws: CourierError.self) { try StubTransport(replaying: URL(fileURLWithPath: "/dev/null")) }
    }
}
