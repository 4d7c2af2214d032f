// vapor/websocket-kit, the ws-echo row's peer (--mode websocket, the only mode): the phases
// of BenchSupport's runWebSocketBench with websocket-kit's client, as its users write it:
//
//   open    WebSocket.connect(to: "wss://...", configuration: (tlsConfiguration trusting
//           --ca-file alone), on: MultiThreadedEventLoopGroup.singleton) { ws in ... }; in
//           onUpgrade, ws.onText yields each message into an AsyncThrowingStream and onClose
//           finishes it (websocket-kit delivers messages through callbacks on the channel's
//           event loop; the stream turns them into a sequence a task awaits).
//   rtt     try await ws.send(text) (returns when NIO has written the frame), then the next
//           message from the stream; checked.
//   stream  a sender task sends --ws-messages messages, each `try await ws.send(text)`, while
//           the socket's task reads as many from the stream, each checked.
//   close   try await ws.close(code: .normalClosure), then the channel's close (after the
//           server's close frame).

import ArgumentParser
import BenchSupport
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import WebSocketKit

@main
struct BenchWSKit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-wskit",
        abstract: "WebSocket round trips and streamed messages against an echo server with vapor/websocket-kit."
    )

    @OptionGroup var options: BenchOptions
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var tls: TLSOptions
    @OptionGroup var webSocket: WebSocketBenchOptions

    func validate() throws {
        try transfer.validate(supported: [.websocket])
        if tls.caBundle != nil { throw ValidationError("--ca-bundle is bench-courier's; use --ca-file") }
        if tls.httpVersion != nil { throw ValidationError("--http-version is for the request modes") }
    }

    func run() async throws {
        // Frames up to 16 MiB, as Courier's default maximumMessageSize (websocket-kit's default
        // is 16 KiB: a larger --ws-bytes would fail).
        var configuration = WebSocketClient.Configuration(maxFrameSize: 1 << 24)
        if let caFile = tls.caFile {
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            tlsConfiguration.trustRoots = .file(caFile)
            configuration.tlsConfiguration = tlsConfiguration
        }
        let url = options.url
        let group = MultiThreadedEventLoopGroup.singleton
        try await runWebSocketBench(
            client: "wskit", options: webSocket,
            open: { [configuration] index in
                try await KitSocket.connect(to: url, configuration: configuration, on: group, index: index)
            },
            roundTrips: { socket, plan in
                var messages = socket.messages.makeAsyncIterator()
                for round in 0..<plan.count {
                    try await socket.ws.send(plan.message(round))
                    guard let echo = try await messages.next() else { throw plan.ended(at: round) }
                    plan.echo(echo, round)
                }
            },
            stream: { socket, plan in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for index in 0..<plan.count {
                            try await socket.ws.send(plan.message(index))
                        }
                    }
                    var messages = socket.messages.makeAsyncIterator()
                    for index in 0..<plan.count {
                        guard let echo = try await messages.next() else { throw plan.ended(at: index) }
                        plan.echo(echo, index)
                    }
                    try await group.waitForAll()
                }
            },
            close: { socket in
                try await socket.ws.close(code: .normalClosure)
                try await socket.ws.onClose.get()
            }
        )
    }
}

/// A websocket-kit WebSocket and the text messages it received, as a sequence.
struct KitSocket: Sendable {
    let ws: WebSocket
    let messages: AsyncThrowingStream<String, any Error>

    static func connect(
        to url: String, configuration: WebSocketClient.Configuration, on group: any EventLoopGroup, index: Int
    ) async throws -> KitSocket {
        let (messages, continuation) = AsyncThrowingStream<String, any Error>.makeStream()
        // The connect future succeeds when the server's 101 has been read, before onUpgrade
        // has the WebSocket: the WebSocket comes from onUpgrade, an error from the future.
        let ws: WebSocket = try await withCheckedThrowingContinuation { opening in
            let opener = Opener(opening)
            WebSocket.connect(to: url, configuration: configuration, on: group) { ws in
                ws.onText { _, text in continuation.yield(text) }
                ws.onBinary { _, _ in
                    continuation.finish(throwing: BenchFailure("socket \(index): a binary message arrived"))
                }
                ws.onClose.whenComplete { _ in continuation.finish() }
                opener.resume(with: .success(ws))
            }.whenFailure { error in
                opener.resume(with: .failure(error))
            }
        }
        return KitSocket(ws: ws, messages: messages)
    }
}

/// Resumes the task that opens a WebSocket once: with the WebSocket, or the connect's error.
private final class Opener: Sendable {
    private let continuation: Mutex<CheckedContinuation<WebSocket, any Error>?>

    init(_ continuation: CheckedContinuation<WebSocket, any Error>) {
        self.continuation = Mutex(continuation)
    }

    func resume(with result: Result<WebSocket, any Error>) {
        let taken = continuation.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }
        taken?.resume(with: result)
    }
}
