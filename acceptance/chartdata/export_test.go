package chartdata

// Internals the external tests (package chartdata_test) read.
var LogHistogramOf = logHistogram

// CDFSamples is the most samples a stored curve keeps as they are.
const CDFSamples = cdfBody + cdfTail

// CDFMaxPoints bounds a reduced curve: body, tail, minimum, maximum and
// the exact percentiles.
var CDFMaxPoints = cdfBody + cdfTail + len(cdfQuantiles) + 2
