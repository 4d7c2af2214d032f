// AsyncHTTPClient: C worker tasks, each GETs --url until --total requests are
// done, collects the body, checks status 200 and the body length (or decodes
// it with JSONDecoder when --decode is given).

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
        abstract: "GET a small file TOTAL times with AsyncHTTPClient, CONCURRENCY at a time."
    )

    @OptionGroup var options: BenchOptions

    func run() async throws {
        let options = self.options
        var configuration = HTTPClient.Configuration()
        configuration.httpVersion = .http1Only
        configuration.connectionPool = .init(
            idleTimeout: .seconds(65),
            concurrentHTTP1ConnectionsPerHostSoftLimit: options.concurrency
        )
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let url = options.url
        let expected = options.expectedBytes
        let decode = options.decode

        let result: (seconds: Double, requests: Int)
        do {
            result = try await runWorkers(total: options.total, concurrency: options.concurrency) { n in
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
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        printResult(client: decode ? "ahc-decode" : "ahc", seconds: result.seconds, requests: result.requests)
    }
}
