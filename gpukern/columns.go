package gpukern

// Columns is a column-major float32 matrix resident in device memory (rows x dims, one contiguous
// run of rows per dimension), made by Device.Upload. It belongs to its Device; Free returns the
// memory. A Columns is not safe for concurrent Free and use.
type Columns struct {
	dev        *Device
	ptr        uintptr // device address of dimension 0; dimension j starts rows*4*j bytes later
	rows, dims int
}

// Rows is the number of rows.
func (c *Columns) Rows() int { return c.rows }

// Dims is the number of dimensions.
func (c *Columns) Dims() int { return c.dims }
