// FoundationNetworking's URLSession: an ephemeral session allowing C
// connections per host; --total `data(from:)` calls, a child task each, C at
// a time, checking status 200 and the body length (or decoding it
// with JSONDecoder when --decode is given).

import ArgumentParser
import BenchSupport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@main
struct BenchURLSession: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-urlsession",
        abstract: "GET a small file TOTAL times with URLSession, CONCURRENCY at a time."
    )

    @OptionGroup var options: BenchOptions

    func run() async throws {
        let options = self.options
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = options.concurrency
        configuration.timeoutIntervalForRequest = 30
        let session = URLSession(configuration: configuration)
        guard let url = URL(string: options.url) else { throw BenchFailure("bad URL \(options.url)") }
        let expected = options.expectedBytes
        let decode = options.decode

        let result = try await runRequests(total: options.total, concurrency: options.concurrency) { n in
            let (data, response) = try await session.data(from: url)
            let status = (response as? HTTPURLResponse)?.statusCode ?? -1
            if decode {
                guard status == 200 else { throw BenchFailure("request \(n): status \(status), expected 200") }
                let value = try JSONDecoder().decode(Small.self, from: data)
                guard value.id > 0 else { throw BenchFailure("request \(n): unexpected body") }
            } else {
                try check(status: status, bodyCount: data.count, expected: expected, request: n)
            }
        }
        session.finishTasksAndInvalidate()
        printResult(
            client: decode ? "urlsession-decode" : "urlsession", seconds: result.seconds, requests: result.requests)
    }
}
