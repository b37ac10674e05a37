export { SAFETENSORS_DTYPES, dtypeSize, isSafetensorsDType, type SafetensorsArray, type SafetensorsDType } from './dtypes';
export { MAX_HEADER_BYTES, type TensorInfo } from './header';
export { numberToBf16Bits, numberToF16Bits } from './convert';
export { readSafetensors, defaultGpuDType, SafetensorsFile, type SafetensorsReader, type UploadOptions } from './read';
export { openCheckpoint, openShardedCheckpoint, readSafetensorsDir, ShardedCheckpoint, INDEX_FILE, SINGLE_FILE } from './checkpoint';
export { writeSafetensors, serializeSafetensors, type SafetensorsTarget, type TensorToWrite, type TensorsToWrite, type WriteResult } from './write';
export { inspectSafetensors, formatInspection, naturalCompare, type Inspection, type InspectRow } from './inspect';
