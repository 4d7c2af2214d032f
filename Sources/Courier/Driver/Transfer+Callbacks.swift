import CCurlShim
import Foundation
import HTTPTypes

// libcurl's per-transfer callbacks. Each receives the `Transfer` as its user data pointer
// (unretained: the driver's `active` table holds the transfer while its handle is on the multi
// handle) and runs on the driver thread, inside `curl_multi_socket_action`.

/// CURLOPT_WRITEFUNCTION: body bytes, already content-decoded by libcurl.
let transferWriteCallback: curl_write_callback = { buffer, size, count, userdata in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

/// CURLOPT_HEADERFUNCTION: one header line at a time, status lines and blank lines included.
let transferHeaderCallback: curl_write_callback = { buffer, size, count, userdata in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

/// Status codes whose `Location` Courier follows (RFC 9110 section 15.4).
private let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

extension Transfer {
    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Int {
        guard head.consume(line), !head.isInterim else { return line.count }
        if hop.followRedirects, redirectStatuses.contains(head.statusCode), head.hasLocation {
            discardingBody = true
            return line.count
        }
        // With a content encoding, Content-Length counts encoded bytes, not what we receive.
        expectedBytes = head.hasContentEncoding ? nil : head.contentLength
        if let limit = hop.maximumResponseSize, let declared = head.contentLength, declared > limit {
            callbackFailure = tooLarge(limit: limit)
            return 0  // aborts the transfer with CURLE_WRITE_ERROR
        }
        if let expectedBytes, expectedBytes > 0 {
            body.reserve(Int(min(expectedBytes, 16 << 20)))
        }
        reporters?.download.update(completedBytes: 0, totalBytes: expectedBytes)
        return line.count
    }

    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if discardingBody { return bytes.count }
        receivedBytes += Int64(bytes.count)
        if let limit = hop.maximumResponseSize, receivedBytes > limit {
            callbackFailure = tooLarge(limit: limit)
            return bytes.count == 0 ? 1 : 0  // any other count aborts with CURLE_WRITE_ERROR
        }
        body.append(bytes)
        reporters?.download.update(completedBytes: receivedBytes, totalBytes: expectedBytes)
        return bytes.count
    }

    private func tooLarge(limit: Int64) -> CourierError {
        .responseTooLarge(
            .init(
                url: current.url, response: head.response, body: nil,
                message: "The response body is larger than the limit of \(limit) bytes"))
    }
}
