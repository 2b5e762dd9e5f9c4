/** Version of this build, reported by /v1/agent/self and `watchword --version`. */
export const VERSION = '0.1.0';
