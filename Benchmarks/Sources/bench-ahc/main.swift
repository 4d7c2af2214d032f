// AsyncHTTPClient, in one of two modes (--mode):
//
//   small           C worker tasks, each GETs --url until --total requests
//                   are done, collects the body, checks status 200 and the
//                   body length (or decodes it with JSONDecoder when --decode
//                   is given).
//   stream-discard  one GET of --url; the body is iterated as it arrives
//                   (`response.body`, an async sequence of ByteBuffer) and
//                   each chunk discarded; status 200 and --expected-bytes in
//                   all are checked.

import ArgumentParser
import AsyncHTTPClient
import BenchSupport
import Foundation
import NIOCore
import NIOFoundationCompat

@main
struct BenchAHC: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-ahc",
        abstract: "GET a small file TOTAL times with AsyncHTTPClient, CONCURRENCY at a time, or stream a large one."
    )

    @OptionGroup var options: BenchOptions
    @OptionGroup var transfer: TransferOptions

    func validate() throws {
        try transfer.validate(supported: [.small, .streamDiscard])
    }

    func run() async throws {
        let options = self.options
        var configuration = HTTPClient.Configuration()
        configuration.httpVersion = .http1Only
        configuration.connectionPool = .init(
            idleTimeout: .seconds(65),
            concurrentHTTP1ConnectionsPerHostSoftLimit: transfer.mode == .small ? options.concurrency : 1
        )
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            switch transfer.mode {
            case .streamDiscard:
                try await streamDiscard(client: client, options: options)
            default:
                try await small(client: client, options: options)
            }
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    func small(client: HTTPClient, options: BenchOptions) async throws {
        let url = options.url
        let expected = options.expectedBytes
        let decode = options.decode
        let result = try await runWorkers(total: options.total, concurrency: options.concurrency) { n in
            let request = HTTPClientRequest(url: url)
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            if decode {
                guard response.status == .ok else {
                    throw BenchFailure("request \(n): status \(response.status.code), expected 200")
                }
                let value = try JSONDecoder().decode(Small.self, from: body)
                guard value.id > 0 else { throw BenchFailure("request \(n): unexpected body") }
            } else {
                try check(
                    status: Int(response.status.code), bodyCount: body.readableBytes,
                    expected: expected, request: n)
            }
        }
        printResult(client: decode ? "ahc-decode" : "ahc", seconds: result.seconds, requests: result.requests)
    }

    func streamDiscard(client: HTTPClient, options: BenchOptions) async throws {
        let url = options.url
        let expected = options.expectedBytes
        let received = Counter()
        let result = try await runWorkers(total: 1, concurrency: 1) { n in
            let request = HTTPClientRequest(url: url)
            // The deadline covers the whole body; scripts/bench kills a run after RUN_TIMEOUT anyway.
            let response = try await client.execute(request, timeout: .seconds(3600))
            var total = 0
            for try await chunk in response.body {
                total += chunk.readableBytes
            }
            try check(status: Int(response.status.code), bodyCount: total, expected: expected, request: n)
            _ = received.add(total)
        }
        printResult(client: "ahc", seconds: result.seconds, requests: result.requests, bytes: received.value)
    }
}
