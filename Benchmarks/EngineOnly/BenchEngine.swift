// bench-engine: the small-GET row on Courier's engine alone, with no session above it.
//
// The same shape as every client of the row (BenchSupport's `runRequests`, compiled into this
// program through the link BenchSupport.swift: a task group, a child task per request, CONCURRENCY at once, every response's
// status and length checked), but each child task makes its transfer on the engines directly,
// as the request pipeline does at the end of its work: the request's head with a default
// session's header fields, a default session's transfer options, the session's shared form of
// those fields. No session, pipeline, cache, task list or response serializer runs. Set
// beside `c-as-courier` (libcurl set up as Courier sets it up, driven from C) and `courier`
// (the whole client), it splits Courier's distance to the C program into the engine's part
// and the layers' above it.
//
// It is a target of the Courier package, not of Benchmarks/Package.swift, because the
// engine's interface is the package's own (`package` access), not public.

import ArgumentParser
import CCourierSystem
import Courier
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

    @OptionGroup var options: BenchOptions

    @Option(help: "Engines; by default a default session's: the processors the process may use, at most 8.")
    var engines = min(Int(courier_available_processors()), 8)

    func validate() throws {
        guard engines > 0 else { throw ValidationError("--engines must be positive") }
        guard URL(string: options.url)?.scheme == "http", !options.decode else {
            throw ValidationError("an http URL and no --decode: this client collects bodies over plain HTTP")
        }
    }

    func run() async throws {
        let options = self.options
        let parsed = URL(string: options.url)!
        let transport = EngineGroup(
            engineCount: engines,
            limits: .init(
                maximumConnectionsPerHost: options.concurrency,
                cookies: .init(jar: nil, policy: .always, logger: nil)))
        // A default session's fields: the User-Agent and Accept-Language its manager sets, and
        // Accept-Encoding, which the engine's shared list adds.
        var fields = HTTPFields()
        fields[.userAgent] = "Courier/\(CourierInfo.version) (Linux) libcurl/\(CurlRuntime.version)"
        fields[.acceptLanguage] = RequestBuilding.acceptLanguage
        let shared = transport.sharedHeaders(for: fields, acceptsCompressedResponses: true)
        var transferOptions = CourierTransport.TransferOptions()
        transferOptions.bypassesProxies = true
        let sharedOptions = SharedTransferOptions(transferOptions)
        let authority = parsed.port.map { "\(parsed.host!):\($0)" } ?? parsed.host!
        let head = HTTPRequest(
            method: .get, scheme: "http", authority: authority, path: parsed.path, headerFields: fields)
        let url = options.url
        let expected = options.expectedBytes
        let result = try await runRequests(total: options.total, concurrency: options.concurrency) { n in
            // The transfer request, the transfer, and its output as the response the pipeline
            // makes of it.
            let request = TransferRequest(head: head, urlString: url, body: nil, options: sharedOptions)
            let transfer = transport.makeTransfer(
                request, reporters: nil, sharedHeaders: shared, sink: nil, maximumBytesPerSecond: nil)
            transfer.start()
            let response = RawResponse(try await transfer.value(cancelsWithCaller: true))
            let status = Int(response.head.status.code)
            try check(status: status, bodyCount: response.data.count, expected: expected, request: n)
        }
        printResult(client: "courier-engine", seconds: result.seconds, requests: result.requests)
        transport.shutdown()
    }
}
