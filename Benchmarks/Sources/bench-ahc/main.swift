// AsyncHTTPClient, in one of three modes (--mode):
//
//   small           --total GETs of --url, a child task each, C at a time;
//                   each collects the body, checks status 200 and the
//                   body length (or decodes it with JSONDecoder when --decode
//                   is given).
//   stream-discard  one GET of --url; the body is iterated as it arrives
//                   (`response.body`, an async sequence of ByteBuffer) and
//                   each chunk discarded; status 200 and --expected-bytes in
//                   all are checked.
//   sse-decode      one GET of an event stream, split into events by hand
//                   (blank lines, `data:` lines), each decoded with
//                   JSONDecoder and checked, until `data: [DONE]`.
//
// Over https (the https and h2 rows of scripts/bench), --ca-file is the one
// trusted root (NIOSSL TLSConfiguration.trustRoots = .file) and
// --http-version picks the version: 1.1 keeps .http1Only and the connection
// pool of the plain-HTTP row; 2 uses the default configuration
// (.automatic: h2 through ALPN, default connection pool). With it, each
// response's version must be that version.

import ArgumentParser
import AsyncHTTPClient
import BenchSupport
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOSSL

@main
struct BenchAHC: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-ahc",
        abstract: "GET a small file TOTAL times with AsyncHTTPClient, CONCURRENCY at a time, or stream a large one."
    )

    @OptionGroup var options: BenchOptions
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var tls: TLSOptions

    func validate() throws {
        try transfer.validate(supported: [.small, .streamDiscard, .sseDecode])
        if tls.caBundle != nil { throw ValidationError("--ca-bundle is bench-courier's; use --ca-file") }
        if tls.httpVersion != nil || tls.caFile != nil {
            guard transfer.mode == .small else {
                throw ValidationError("--ca-file and --http-version are for --mode small")
            }
        }
        if tls.httpVersion != nil, options.decode {
            throw ValidationError("--http-version checks each response's version: not with --decode")
        }
    }

    func run() async throws {
        let options = self.options
        var configuration = HTTPClient.Configuration()
        if tls.httpVersion != .http2 {
            configuration.httpVersion = .http1Only
            configuration.connectionPool = .init(
                idleTimeout: .seconds(65),
                concurrentHTTP1ConnectionsPerHostSoftLimit: transfer.mode == .small ? options.concurrency : 1
            )
        }
        if let caFile = tls.caFile {
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            tlsConfiguration.trustRoots = .file(caFile)
            configuration.tlsConfiguration = tlsConfiguration
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            switch transfer.mode {
            case .streamDiscard:
                try await streamDiscard(client: client, options: options)
            case .sseDecode:
                try await sseDecode(client: client, options: options)
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
        let httpVersion = tls.httpVersion
        let result = try await runRequests(total: options.total, concurrency: options.concurrency) { n in
            let request = HTTPClientRequest(url: url)
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            if httpVersion != nil {
                let version = response.version
                try check(
                    httpVersion: version.major == 2 ? "2" : "\(version.major).\(version.minor)",
                    expected: httpVersion, request: n)
            }
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
        printResult(
            client: decode ? "ahc-decode" : "ahc", seconds: result.seconds, requests: result.requests,
            httpVersion: httpVersion)
    }

    func streamDiscard(client: HTTPClient, options: BenchOptions) async throws {
        let url = options.url
        let expected = options.expectedBytes
        let received = Counter()
        let result = try await runRequests(total: 1, concurrency: 1) { n in
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

    /// One event stream read with a hand-written splitter, as an AsyncHTTPClient user writes
    /// one: the body's bytes gathered until a blank line, the `data:` lines of each event
    /// joined, decoded with `JSONDecoder`, until `[DONE]`.
    func sseDecode(client: HTTPClient, options: BenchOptions) async throws {
        let url = options.url
        let expected = options.total
        let counted = Counter()
        let result = try await runRequests(total: 1, concurrency: 1) { n in
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "text/event-stream")
            let response = try await client.execute(request, timeout: .seconds(3600))
            guard response.status == .ok else { throw BenchFailure("status \(response.status.code)") }
            let decoder = JSONDecoder()
            var checker = EventChecker()
            var pending: [UInt8] = []
            var done = false
            reading: for try await buffer in response.body {
                pending.append(contentsOf: buffer.readableBytesView)
                var start = 0
                // Each event ends with a blank line ("\n\n").
                while let end = Self.blankLine(in: pending, from: start) {
                    var data: [UInt8] = []
                    for line in pending[start..<end].split(
                        separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                    where line.starts(with: Array("data:".utf8)) {
                        var value = line.dropFirst(5)
                        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
                        if !data.isEmpty { data.append(UInt8(ascii: "\n")) }
                        data.append(contentsOf: value)
                    }
                    start = end + 2
                    if data == Array("[DONE]".utf8) {
                        done = true
                        break reading
                    }
                    if !data.isEmpty { try checker.check(decoder.decode(BenchEvent.self, from: Data(data))) }
                }
                pending.removeFirst(start)
            }
            guard done else { throw BenchFailure("the stream ended before [DONE]") }
            try checker.finish(expected: expected)
            _ = counted.add(checker.count)
        }
        printResult(client: "ahc", seconds: result.seconds, requests: result.requests, events: counted.value)
    }

    /// The index of the first "\n\n" in `bytes` at or after `start`.
    static func blankLine(in bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index + 1 < bytes.count {
            if bytes[index] == 0x0A, bytes[index + 1] == 0x0A { return index }
            index += 1
        }
        return nil
    }
}
