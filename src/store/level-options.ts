/**
 * How every store's LevelDB is opened. LevelDB maps each table file it has open into memory, and
 * a start reads every file: with its default of 1,000 open files, ten million tokens left 1.9 GB
 * of file pages mapped (counted in RSS) after the load. Everything is read from memory after the
 * start, so few files need to stay open: 74 is the least LevelDB accepts (64 table files, ~128 MB).
 */
export const LEVEL_OPTIONS = {
  keyEncoding: 'utf8',
  valueEncoding: 'view',
  writeBufferSize: 16 * 1024 * 1024,
  maxOpenFiles: 74,
} as const;
