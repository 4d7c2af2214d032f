// The ws-echo row's server: a WebSocket echo server on SwiftNIO (NIOHTTP1's server pipeline
// with NIOWebSocketServerUpgrader) over TLS (NIOSSL, the bench certificate and key).
//
// Every text, binary and continuation frame is written back as it came (unmasked, same
// opcode and FIN bit, so fragmented messages come back fragmented the same way); a ping is
// answered with a pong carrying its payload; a close is answered with a close carrying its
// code, and the connection is then closed. Writes are flushed when a read burst ends
// (channelReadComplete), so many frames read at once leave in one TLS write. A request that
// is not an upgrade gets 426. Any path is accepted.
//
// It listens on 127.0.0.1:--port (0: a free port) with a MultiThreadedEventLoopGroup of
// --threads threads (System.coreCount by default), then prints one line on standard output:
//
//   READY port=PORT threads=N
//
// scripts/bench starts it with a pipe as its standard input and reads that line; the server
// exits when its standard input ends (its parent went away, or closed the pipe) or when its
// parent process changes, so it never outlives the script.

import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

@main
struct BenchWSServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-wsserver",
        abstract: "A WebSocket echo server over TLS (SwiftNIO, NIOSSL) for scripts/bench's ws-echo row."
    )

    @Option(help: "The certificate chain (PEM) the server presents.")
    var cert: String

    @Option(help: "The certificate's private key (PEM).")
    var key: String

    @Option(help: "The port on 127.0.0.1 (0: a free port, printed in the READY line).")
    var port: Int = 0

    @Option(help: "Event loop threads (0: System.coreCount).")
    var threads: Int = 0

    @Option(help: "The largest frame taken, in bytes (16 MiB: Courier's default maximumMessageSize).")
    var maxFrameSize: Int = 1 << 24

    func run() throws {
        let chain = try NIOSSLCertificate.fromPEMFile(cert).map { NIOSSLCertificateSource.certificate($0) }
        let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
        let sslContext = try NIOSSLContext(configuration: tls)
        let count = threads > 0 ? threads : System.coreCount
        let group = MultiThreadedEventLoopGroup(numberOfThreads: count)
        let maxFrameSize = self.maxFrameSize

        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: maxFrameSize,
            automaticErrorHandling: true,
            shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(EchoHandler())
                }
            }
        )
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let operations = channel.pipeline.syncOperations
                    try operations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try operations.configureHTTPServerPipeline(
                        withServerUpgrade: (
                            upgraders: [upgrader],
                            completionHandler: { context in
                                context.pipeline.removeHandler(name: NotUpgradedHandler.name, promise: nil)
                            }
                        )
                    )
                    try operations.addHandler(NotUpgradedHandler(), name: NotUpgradedHandler.name)
                }
            }
        let server = try bootstrap.bind(host: "127.0.0.1", port: port).wait()
        let bound = server.localAddress?.port ?? port
        FileHandle.standardOutput.write(Data("READY port=\(bound) threads=\(count)\n".utf8))
        exitWithParent()
        try server.closeFuture.wait()
    }
}

/// Exits when standard input ends or the parent process changes (checked every second).
func exitWithParent() {
    let parent = getppid()
    Thread.detachNewThread {
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        exit(0)
    }
    Thread.detachNewThread {
        while getppid() == parent { sleep(1) }
        exit(0)
    }
}

/// The WebSocket side of a connection: echoes messages, answers pings and the close.
final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var closing = false
    private var pending = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation:
            guard !closing else { return }
            write(context, WebSocketFrame(fin: frame.fin, opcode: frame.opcode, data: frame.unmaskedData))
        case .ping:
            guard !closing else { return }
            write(context, WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
        case .connectionClose:
            guard !closing else { return }
            closing = true
            var payload = frame.unmaskedData
            let code = payload.readSlice(length: 2) ?? ByteBuffer()
            pending = false
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: code)))
                .whenComplete { _ in channel.close(promise: nil) }
        case .pong:
            break
        default:
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if pending {
            pending = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func write(_ context: ChannelHandlerContext, _ frame: WebSocketFrame) {
        context.write(wrapOutboundOut(frame), promise: nil)
        pending = true
    }
}

/// A request that did not ask for a WebSocket: 426 Upgrade Required, then the connection is
/// closed.
final class NotUpgradedHandler: ChannelInboundHandler, RemovableChannelHandler {
    static let name = "not-upgraded"
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Connection", value: "close")
        headers.add(name: "Content-Length", value: "0")
        headers.add(name: "Upgrade", value: "websocket")
        let head = HTTPResponseHead(version: .http1_1, status: .upgradeRequired, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
