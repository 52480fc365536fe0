-- wrk script for BenchmarkCapacity: POST the JSON body found in the file
-- named by ACCORD_WRK_BODY (the benchmark writes the generator's own
-- request there) to the URL given on wrk's command line.
local path = os.getenv("ACCORD_WRK_BODY")
assert(path, "set ACCORD_WRK_BODY to the request body file")
local f = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "text/event-stream"
