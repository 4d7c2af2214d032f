import CCurlShim

/// Idle easy handles of one driver, for reuse. Driver thread only.
///
/// A handle whose last transfer was plain (a GET or HEAD without body, see
/// `TransferRequest.isPlain`) is kept "clean" together with the options it was configured
/// with: the next plain transfer with the same options only sets what differs per request.
/// Every other handle is reset (`curl_easy_reset`) before reuse, so no option leaks from one
/// transfer into the next.
struct EasyHandlePool {
    private var clean: [(handle: UnsafeMutableRawPointer, options: TransferOptions)] = []
    private var dirty: [UnsafeMutableRawPointer] = []
    private static let limit = 256

    /// A handle for `transfer`; sets `transfer.handleIsClean` for `configure`.
    mutating func take(for transfer: Transfer) -> UnsafeMutableRawPointer {
        if transfer.hop.isPlain, let last = clean.last, last.options == transfer.current.options {
            clean.removeLast()
            transfer.handleIsClean = true
            return last.handle
        }
        transfer.handleIsClean = false
        if let handle = dirty.popLast() ?? clean.popLast()?.handle {
            curl_easy_reset(handle)
            return handle
        }
        return curl_easy_init()!
    }

    mutating func giveBack(_ handle: UnsafeMutableRawPointer, after transfer: Transfer) {
        guard clean.count + dirty.count < Self.limit else {
            curl_easy_cleanup(handle)
            return
        }
        if transfer.hop.isPlain && transfer.redirectCount == 0 {
            clean.append((handle, transfer.current.options))
        } else {
            dirty.append(handle)
        }
    }

    mutating func removeAll() {
        for entry in clean { curl_easy_cleanup(entry.handle) }
        for handle in dirty { curl_easy_cleanup(handle) }
        clean.removeAll()
        dirty.removeAll()
    }
}
