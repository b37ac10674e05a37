/** Base class of every error a user of Rusty can cause; `code` names the kind for programs. */
export class RustyError extends Error {
  readonly code: string = 'RUSTY_ERROR';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** No adapter, a lost device, or a GPU call that failed. */
export class DeviceError extends RustyError {
  override readonly code = 'DEVICE';
}

/** An allocation the device cannot satisfy (over its limits or out of memory). */
export class OutOfMemoryError extends RustyError {
  override readonly code = 'OUT_OF_MEMORY';
}

/** A WGSL kernel that failed to compile or to build a pipeline. */
export class ShaderError extends RustyError {
  override readonly code = 'SHADER';
}

/** Shapes, dtypes or sizes that do not fit the operation. */
export class ShapeError extends RustyError {
  override readonly code = 'SHAPE';
}

/** An invalid option or configuration value. */
export class ConfigError extends RustyError {
  override readonly code = 'CONFIG';
}
