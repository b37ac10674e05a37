export { readAll, isBlobLike, isByteSource, isFileTree, type BlobLike, type ByteSink, type ByteSource, type FileTree } from './source';
export { blobSource, blobTree, bytesSource, memoryTree, pickedFilesTree, type PickedFile } from './blob';
export { opfsTree, opfsRemove } from './opfs';
