// `import CourierServiceLifecycle` brings the manager, its configuration and its errors along.
@_exported import Courier
