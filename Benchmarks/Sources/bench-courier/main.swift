// Courier: one HTTPSessionManager allowing C connections per host; C worker
// tasks, each GETs small.json through the manager until --total requests are
// done, as `Data` through DataResponseSerializer (checking the length), or
// with --decode as `Small` through the manager's JSON decoding.
//
// The manager's base URL is --url without its last path component, and the
// request path is that component, so the call reads as an API client would
// write it: api.GET("small.json", ...).

import ArgumentParser
import BenchSupport
import Courier
import Foundation

@main
struct BenchCourier: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-courier",
        abstract: "GET a small file TOTAL times with Courier, CONCURRENCY at a time."
    )

    @OptionGroup var options: BenchOptions

    @Option(help: "Session configuration: default or ephemeral.")
    var session: String = "default"

    func validate() throws {
        guard ["default", "ephemeral"].contains(session) else {
            throw ValidationError("--session must be default or ephemeral")
        }
    }

    func run() async throws {
        let options = self.options
        guard let url = URL(string: options.url) else { throw BenchFailure("bad URL \(options.url)") }
        let path = url.lastPathComponent
        let baseURL = url.deletingLastPathComponent()
        let api = await makeManager(
            baseURL: baseURL, ephemeral: session == "ephemeral", concurrency: options.concurrency)
        let expected = options.expectedBytes
        let decode = options.decode

        let result = try await runWorkers(total: options.total, concurrency: options.concurrency) { n in
            if decode {
                let value: Small = try await api.GET(path, as: Small.self)
                guard value.id > 0 else { throw BenchFailure("request \(n): unexpected body") }
            } else {
                // The serializer's default acceptable status codes are 200..<300;
                // the length check is the same as the other clients'.
                let data: Data = try await api.GET(path, serializer: DataResponseSerializer())
                try check(status: 200, bodyCount: data.count, expected: expected, request: n)
            }
        }
        printResult(client: decode ? "courier-decode" : "courier", seconds: result.seconds, requests: result.requests)
    }
}

@HTTPSessionActor
func makeManager(baseURL: URL, ephemeral: Bool, concurrency: Int) -> HTTPSessionManager {
    var configuration: HTTPSessionConfiguration = ephemeral ? .ephemeral : .default
    configuration.maximumConnectionsPerHost = concurrency
    return HTTPSessionManager(baseURL: baseURL, configuration: configuration)
}
