// `import Courier` brings the whole public API: the types that live in the lower layers are
// re-exported from here.
@_exported import CourierCore
@_exported import CourierPipeline
@_exported import CourierSerialization
@_exported import CourierStorage
@_exported import CourierTransport
