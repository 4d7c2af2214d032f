// bench-engine: the small-GET row on Courier's engine alone, with no session above it.
//
// The same shape as bench-courier's small mode (a task group, a child task per request,
// CONCURRENCY of them at once, every response's status and length checked), but each child
// task makes its transfer on the engines directly, as the request pipeline does at the end of
// its work: the request's head with a default session's header fields, a default session's
// transfer options, the session's shared form of those fields. No session, pipeline, cache,
// task list or response serializer runs. Set beside `c-as-courier` (libcurl set up as
// Courier sets it up, driven from C) and `courier` (the whole client), it splits Courier's
// distance to the C program into the engine's part and the layers' above it.
//
// It lives in the Courier package, not in Benchmarks/Package.swift, because the engine's
// interface is the package's own (`package` access), not public.

import ArgumentParser
import CCourierSystem
import CourierCore
import CourierEngine
import CourierPipeline
import CourierTransport
import Foundation
import HTTPTypes

@main
struct BenchEngine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-engine",
        abstract: "GET a small file TOTAL times on Courier's engine alone, CONCURRENCY at a time.")

    @Option(help: "The URL to GET, e.g. http://127.0.0.1:8080/small.json.")
    var url: String

    @Option(help: "Number of requests in all.")
    var total = 20000

    @Option(help: "Requests in flight at once (child tasks at once, and connections per host).")
    var concurrency = 64

    @Option(help: "Expected body length in bytes; every response must have it.")
    var expectedBytes = 500

    @Option(help: "Engines; by default a default session's: the processors the process may use, at most 8.")
    var engines = min(Int(courier_available_processors()), 8)

    func validate() throws {
        guard total > 0, concurrency > 0, engines > 0 else {
            throw ValidationError("--total, --concurrency and --engines must be positive")
        }
        guard let parsed = URL(string: url), parsed.scheme == "http", parsed.host != nil else {
            throw ValidationError("--url: an http URL expected, e.g. http://127.0.0.1:8080/small.json")
        }
    }

    func run() async throws {
        let parsed = URL(string: url)!
        let transport = EngineGroup(
            engineCount: engines,
            limits: .init(
                maximumConnectionsPerHost: concurrency,
                cookies: .init(jar: nil, policy: .always, logger: nil)))
        // A default session's fields: the User-Agent and Accept-Language its manager sets, and
        // Accept-Encoding, which the engine's shared list adds.
        var fields = HTTPFields()
        fields[.userAgent] = "Courier/1.0.0 (Linux) libcurl/\(CurlRuntime.version)"
        fields[.acceptLanguage] = RequestBuilding.acceptLanguage
        let shared = transport.sharedHeaders(for: fields, acceptsCompressedResponses: true)
        var options = TransferOptions()
        options.bypassesProxies = true
        let sharedOptions = SharedTransferOptions(options)
        let authority = parsed.port.map { "\(parsed.host!):\($0)" } ?? parsed.host!
        let head = HTTPRequest(
            method: .get, scheme: "http", authority: authority, path: parsed.path, headerFields: fields)
        let url = self.url
        let expected = expectedBytes

        let clock = ContinuousClock()
        let start = clock.now
        var done = 0
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Each child task: the transfer request, the transfer, its output as the
            // response the pipeline makes of it, and the check.
            @Sendable func get(_ n: Int) async throws {
                let request = TransferRequest(head: head, urlString: url, body: nil, options: sharedOptions)
                let transfer = transport.makeTransfer(
                    request, reporters: nil, sharedHeaders: shared, sink: nil, maximumBytesPerSecond: nil)
                transfer.start()
                let response = RawResponse(try await transfer.value(cancelsWithCaller: true))
                let status = Int(response.head.status.code)
                guard status == 200, response.data.count == expected else {
                    throw ValidationError(
                        "request \(n): status \(status), \(response.data.count) bytes, expected 200 and \(expected)")
                }
            }
            var issued = 0
            while issued < min(concurrency, total) {
                let n = issued
                group.addTask { try await get(n) }
                issued += 1
            }
            while try await group.next() != nil {
                done += 1
                if issued < total {
                    let n = issued
                    group.addTask { try await get(n) }
                    issued += 1
                }
            }
        }
        let elapsed = start.duration(to: clock.now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let line =
            "RESULT client=courier-engine seconds=\(String(format: "%.4f", seconds)) requests=\(done) "
            + "maxrss_kb=\(usage.ru_maxrss)\n"
        FileHandle.standardOutput.write(Data(line.utf8))
        transport.shutdown()
    }
}
