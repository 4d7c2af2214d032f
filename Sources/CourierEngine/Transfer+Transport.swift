import CourierTransport

/// A transfer as the pipeline sees it, through the seam.
extension Transfer: TransportTransfer {
    package func resumeReceiving() {
        _ = engine.submit(.resumeReceiving(self))
    }
}
